// Package etcdstore implements zetcd.Backend on etcd v3: the ZooKeeper tree, its sessions and
// watches kept in etcd under one key prefix. It is the only library package that imports the
// etcd client (deps_test.go).
//
// The whole key layout is the comment at the top of keys.go. A session is an etcd lease
// (session.go). One etcd watch per process over the prefix keeps an in-memory replica of the
// tree (replica.go), which answers the reads, and feeds the watch registry and session and
// process liveness (feed.go). Every write is one guarded etcd Txn in the common case, whose
// compares encode ZooKeeper's preconditions and whose Else branch reads what names the error,
// which internal/znode's Check* functions then decide in ZooKeeper's order (create.go,
// write.go; multi.go checks a multi's ops on an overlay of the replica). ACL decisions are taken
// on the replica and pinned by the commit (acl.go). One elected process reaps containers and TTL nodes and
// ends the sessions of dead processes (reaper.go, orphans.go). Writers that keep changing what a
// write read make it retry up to maxConflictRetries (retry.go). Writes that would grow the data
// past its limit below etcd's space quota are refused with QuotaExceeded, sized from a
// background poll of etcd's status (space.go).
package etcdstore

// Package etcdstore implements zetcd.Backend on etcd v3: the ZooKeeper tree, its sessions and
// watches kept in etcd under one key prefix. It is the only library package that imports the
// etcd client (deps_test.go).
//
// The whole key layout is the comment at the top of keys.go. A session is an etcd lease
// (session.go); every write is one guarded etcd Txn in the common case, whose compares encode
// ZooKeeper's preconditions and whose Else branch reads what names the error, which
// internal/znode's Check* functions then decide in ZooKeeper's order (create.go, ops.go, multi.go
// for the multi overlay). ACL decisions are taken on a cache and pinned by the commit (acl.go).
// One etcd watch per process over the prefix feeds the watch registry, session and process
// liveness and the ACL cache (feed.go). One elected process reaps containers and TTL nodes and
// ends the sessions of dead processes (reaper.go, orphans.go). Writers that keep changing what a
// write read make it retry up to maxConflictRetries (retry.go). Writes that would grow the data
// past its limit below etcd's space quota are refused with QuotaExceeded, sized from a
// background poll of etcd's status (space.go).
package etcdstore

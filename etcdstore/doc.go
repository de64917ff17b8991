// Package etcdstore implements zetcd.Backend on etcd v3: the ZooKeeper tree, its sessions and
// watches kept in etcd under one key prefix. It is the only library package that imports the
// etcd client (deps_test.go).
//
// The whole key layout is the comment at the top of keys.go. A session is an etcd lease
// (session.go). One etcd watch per process over the prefix keeps an in-memory replica of the
// tree (replica.go), which answers the reads, and feeds the watch registry and session and
// process liveness (feed.go). The creates, deletes, setData and multis of all sessions go
// through one committer (commit.go), which checks those waiting at one moment in order with
// internal/znode's Check* functions on an overlay of the replica (multi.go) and commits them as
// one etcd Txn guarded by everything the checks read (znode by znode, or as a whole with the
// fence key when this is the only zetcd: Config.FenceGuards), each write with its own zxid
// (zxid.go).
// setACL reads its node from etcd and pins its ACL decision (write.go, acl.go). One elected
// process reaps containers and TTL nodes and
// ends the sessions of dead processes (reaper.go, orphans.go). Writers that keep changing what a
// write read make it retry up to maxConflictRetries (retry.go). Writes that would grow the data
// past its limit below etcd's space quota are refused with QuotaExceeded, sized from a
// background poll of etcd's status (space.go).
package etcdstore

// Package etcdstore implements zetcd.Backend on etcd v3: the ZooKeeper tree, its sessions and
// watches kept in etcd under one key prefix. It is the only library package that imports the
// etcd client (deps_test.go).
//
// The whole key layout is the comment at the top of keys.go. A session is an etcd lease
// (connect.go, session.go). One etcd watch per process over the prefix keeps an in-memory
// replica of the tree (replica.go), which answers the reads, and feeds the watch registry and
// session and process liveness (feed.go). The creates, deletes, setData and multis of all
// sessions go through one committer (commit.go), which checks those waiting at one moment in
// order with internal/znode's Check* functions on an overlay of the replica (overlay.go,
// checks.go) and commits them as one etcd Txn guarded by everything the checks read (txn.go:
// znode by znode, or as a whole with the fence key when this is the only zetcd:
// Config.FenceGuards, fence.go), each write with its own zxid (zxid.go); with the fence, several
// such batches are in flight at once, each checked on the changes of those before it
// (pipeline.go). Writers that keep
// changing what a write read make it retry up to maxConflictRetries. One elected process reaps
// containers and TTL nodes and ends the sessions of dead processes (reaper.go, orphans.go).
// Writes that would grow the data past its limit below etcd's space quota are refused with
// QuotaExceeded, sized from a background poll of etcd's status (space.go). ZooKeeper's quotas on
// subtrees are counted with every write, and enforced with Config.EnforceQuota (quota.go).
//
// The files by concern; a request's verb is found by its file name:
//
//	Store and its setup      store.go (Config, New, Close, the system nodes), stats.go (the
//	                         four-letter words' numbers), kvmetrics.go (etcd request metrics)
//	etcd's limits            space.go (etcd's space, QuotaExceeded), limits.go (etcd's
//	                         request limits as ZooKeeper errors)
//	schema, pure             keys.go (the key layout), values.go (the value codecs), stat.go
//	                         (a node's keys decoded, its Stat derived), zxid.go (zxids from
//	                         revisions); each with its own _test.go
//	replica and feed         replica.go (the in-memory tree), children.go (its child sets),
//	                         feed.go (the etcd watch that keeps it), own.go (the committer's
//	                         own revisions, applied at once), watchacl.go (the ACLs that decide
//	                         a watch event's delivery)
//	write engine             commit.go (the committer: queue, batches, retries), pipeline.go
//	                         (batches in flight behind each other), multi.go (a
//	                         write as ops: parseMulti, runMulti), overlay.go (the state a batch
//	                         is checked on), checks.go (ZooKeeper's per-op checks on it),
//	                         txn.go (the guards and writes a batch commits), fence.go,
//	                         quota.go (ZooKeeper's quotas: statistics, limits)
//	sessions and liveness    connect.go (open, resume), session.go (the Session, its end),
//	                         keepalive.go (the lease keeper), process.go (process and taken
//	                         keys), timing.go (every timing derived from the session timeout)
//	the leader's jobs        reaper.go (containers, TTL nodes), orphans.go (sessions of dead
//	                         processes)
//	handlers by role         read.go (exists, getData, getACL, getChildren(2), sync,
//	                         multiRead, getEphemerals, getAllChildrenNumber), create.go
//	                         (create, create2, createContainer, createTTL), write.go (delete,
//	                         deleteContainer, setData, setACL, reconfig), multi.go (multi),
//	                         watch.go (setWatches(2), addWatch, checkWatches, removeWatches),
//	                         auth.go (auth, whoAmI, sasl), reply.go (every reply's zxid and
//	                         errors)
package etcdstore

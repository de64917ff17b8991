// Package znode holds ZooKeeper's rules for znodes, free of any storage: path validation and
// the parent/name helpers, ACL identities and the permission check, the create modes and TTL
// bounds. It has no goroutines and imports only the standard library and encoding; the etcd
// store (etcdstore) and the watch registry (internal/watch) ask it, so that each rule is
// written once and table-tested without etcd.
//
// Every rule follows ZooKeeper 3.9, and the comment beside it names the ZooKeeper class that owns
// it (PrepRequestProcessor, DataTree, PathUtils, ...); where ZooKeeper's answer is surprising, that
// comment says so.
package znode

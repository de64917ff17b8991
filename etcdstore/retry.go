package etcdstore

// maxConflictRetries is the one retry policy of the store's writes: how often one request reads
// again and commits again when its guarded transaction keeps failing because other writers
// changed what it had read (a node's ACL, a parent's sequence counter, a multi's read set, a
// session's ephemerals). Each retry means another writer succeeded, so the bound is reached
// only under a livelock; the request then fails like an etcd error (the connection closes, the
// session survives, the client retries).
const maxConflictRetries = 100

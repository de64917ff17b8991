// Package watch is the in-memory side of ZooKeeper watches (WatchManager): one Registry per
// process holds every connection's watches by kind and path, the trigger table (EventFor)
// decides which change fires which watch, and a history of recent changes closes the gap
// between a read at some zxid and the registration of the watch it set. Catch-up after lost
// history (setWatches, a resynchronised feed) is decided by CatchUpEvent and applied by
// Registry.Settle.
//
// It knows nothing of etcd: the store feeds it Changes in zxid order (Fire, then Advance) from
// its one watch on etcd. Events go to each connection's Sink; no Sink is ever called with the
// Registry's lock held, so a Sink may block briefly and may call back into the Registry.
package watch

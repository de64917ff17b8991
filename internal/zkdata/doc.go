// Package zkdata reads an Apache ZooKeeper data directory (3.4 to 3.9) and reconstructs the
// state ZooKeeper itself would have after loading it on start: FileTxnSnapLog.restore, that is
// the newest valid snapshot (FileSnap.deserialize) and then every logged transaction after it
// (FileTxnLog's FileTxnIterator), applied as DataTree.processTxn applies them.
//
//	st, err := zkdata.Load("/var/lib/zookeeper", zkdata.Options{})
//	for path, n := range st.Nodes { ... n.Data, n.ACL, n.Stat, n.Children ... }
//	for id, s := range st.Sessions { ... s.Timeout ... }
//
// The formats read:
//
//   - Snapshots, version-2/snapshot.<hex zxid>[.gz|.snappy] (SnapStream): a FileHeader with the
//     magic ZKSN; the sessions and their timeouts (SerializeUtils.serializeSnapshot); the ACL
//     cache (ReferenceCountedACLCache) and the nodes, depth first, ended by the path "/"
//     (DataTree.serialize); an Adler32 seal over every byte before it; then in 3.6 and later a
//     digest (DataTree.ZxidDigest) and in 3.9 the last processed zxid, each sealed again. The
//     ".gz" form is gzip and ".snappy" is snappy-java's SnappyOutputStream framing; the seal is
//     over the uncompressed bytes. A snapshot that fails to decode or whose seal does not match
//     is skipped for the one before it, and said so in State.Skipped and the log.
//   - Transaction logs, version-2/log.<hex zxid> (FileTxnLog): a FileHeader with the magic ZKLG,
//     then entries of an Adler32 checksum, the length and bytes of a TxnHeader, its txn record
//     (zookeeper.jute) and, in 3.6 and later, a TxnDigest, and the end-of-record byte 'B'. The
//     preallocated tail of a log is zeros.
//
// Replay follows FileTxnSnapLog.processTransaction and DataTree.processTxn exactly, including
// what replay over a fuzzy snapshot (one written while the tree changed) meets:
//
//   - a create of a node the snapshot already holds still moves its parent's cversion and pzxid
//     (DataTree.setCversionPzxid), and a create never takes them back;
//   - a delete of a node the snapshot no longer holds still moves its parent's pzxid;
//   - a node deleted with children leaves them in DataTree's map but out of the tree, and a node
//     created again at its path starts with no children;
//   - a node whose ACL id the snapshot's ACL cache lacks gets its ACL from the setACL replayed
//     after it (if none does, its ACL is left nil and State.Skipped says so: ZooKeeper fails to
//     read it).
//
// After replay, ephemerals whose session is not open are deleted, as ZooKeeperServer.loadData
// does. Nodes that no path from the root reaches (DataTree keeps them in its map, a later
// snapshot drops them) are left out of State.Nodes, and State.Skipped says how many.
//
// Stat is the Stat a client reads (DataNode.copyStat): cversion is derived from the stored
// count of creates, numChildren and dataLength from the node, with one difference:
// EphemeralOwner keeps the stored value, which for containers and TTL nodes is the marker
// ZooKeeper hides from clients (EphemeralType); Node.Type and Node.TTL tell them apart, and
// Node.ClientStat returns the Stat exactly as a client reads it.
//
// Errors name the file and byte offset: a checksum mismatch in a log entry that is otherwise
// whole (ZooKeeper refuses it too), and, where ZooKeeper would go on and silently lose data, a
// torn entry followed by more data, a gap in the zxids between the snapshot and the logs or
// between entries, and zxids that go back. A torn last entry of a log (a crash mid-write: its
// end-of-record byte is not 'B' and only zeros follow) is dropped, as Util.readTxnBytes drops
// it, and reported in State.Skipped; a newer log may go on from the zxid before it, as the log a
// restart after the crash writes does. A zxid may jump only to a later epoch (the high 32 bits).
//
// Not reproduced: the snapshot and transaction digests are read but not compared (ZooKeeper
// only logs a mismatch); containers and TTL nodes are told apart as ZooKeeper does with
// zookeeper.extendedTypesEnabled=true, the setting under which they can exist; a directory with
// logs and no snapshot (written by 3.4, or by 3.5+ with zookeeper.snapshot.trust.empty) loads
// from DataTree's initial tree, which ZooKeeper 3.5+ refuses unless told to trust it.
package zkdata

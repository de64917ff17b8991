// Package zklive reads a running Apache ZooKeeper's tree through the client protocol into the
// zkdata.State that zkdata.Load gives for its data directory, and follows the changes made to
// it afterwards: how migration mode (package migrate) copies a ZooKeeper that keeps serving
// (docs/migration.md, "Reading a live ZooKeeper").
//
//	st, err := zklive.Read(ctx, zklive.Config{Servers: []string{"zk1:2181"}})
//
// Read walks the tree from "/" with getData, getACL and getChildren2 of each node in flight at
// once, several nodes at a time, on one session of its own. A node's three replies are kept only
// when their Stats are equal, so each node is one state of it. The State differs from Load's in
// what a client cannot see:
//
//   - Stat is the Stat a client reads (DataNode.copyStat): a container or TTL node has
//     ephemeralOwner 0 (DataNode.getClientEphemeralOwner), so it reads as a persistent node,
//     Node.Type says Persistent and its TTL is unknown.
//   - Sessions holds only the sessions that own ephemerals (their ids are the ephemeralOwners).
//     A session's timeout is what the four-letter word `cons` shows ("to=") for its connection
//     on one of Config.Servers; a session whose client is connected elsewhere, or not at all,
//     or a server that refuses `cons` (4lw.commands.whitelist) leaves it 0, and State.Skipped
//     says so. Sessions does the same for any nodes, those a Follower reported among them. A
//     session's password is not shown either: ZooKeeper derives it from the id
//     (ZooKeeperServer.generatePasswd).
//   - LastZxid is the zxid in the ReplyHeader of a read after a sync (the server's last
//     processed zxid, FinalRequestProcessor), or a newer one a reply carried during the walk.
//   - Snapshot is "".
//
// Read is exact for a ZooKeeper that no client changes while it reads: a tree that changes is
// read node by node, not as one snapshot. Follow sets a persistent recursive watch on "/"
// (addWatch, ZooKeeper 3.6+) before it reads, and then reports every change as the node's new
// state.
//
// A node the reader may not read (NoAuth on getData, getACL or getChildren2) fails Read naming
// it, and so does one whose ACL it may read without ADMIN permission: ZooKeeper then shows its
// digests as "user:x". Config.Auth gives the credentials, the super user's among them.
package zklive

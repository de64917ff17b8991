// Package zkrelay relays ZooKeeper client connections, frame by frame, to a running ZooKeeper
// ensemble, and records each relayed session: the session relay of migration mode
// (docs/migration.md, "Relaying sessions").
//
// A relayed client sees ZooKeeper exactly: the relay forwards the client's ConnectRequest to a
// ZooKeeper server, and from then on copies every frame unchanged in both directions, so the
// session id, password, negotiated timeout, zxids, answers and watch events are ZooKeeper's.
// Those are what zetcd needs to take the session over at cutover under the same id and
// password, when the client reconnects with them.
//
// While copying, the relay decodes (and never alters) what it needs to record each session
// (Session): its password and timeout, the newest zxid sent to its client, the watches the
// client holds, the ephemerals it created, whether a relayed connection serves it now, and
// when it closed. Requests are matched to their replies by xid.
//
// It sits beside xchk and depends on the encoding package only: encoding <- zkrelay <- cmd/*.
// Migration mode (cmd/zetcd/migrate.go) gives it every client connection, four-letter words
// included, which it relays to ZooKeeper too. A zetcd.Server can hand it connections through
// Server.SetHandoff, answering four-letter words itself:
//
//	relay := zkrelay.New(zkrelay.Config{Servers: []string{"zk1:2181", "zk2:2181"}, Logger: log})
//	srv.SetHandoff(func(ctx context.Context, nc net.Conn) { relay.Serve(ctx, nc) })
//	...
//	srv.SetHandoff(nil) // cutover: new connections are zetcd's again
//	relay.CloseAll()    // the relayed clients reconnect, to zetcd
//
// Goroutines: Serve runs in its caller's goroutine, which copies the client's frames to
// ZooKeeper; one more goroutine per relayed connection copies ZooKeeper's frames to the client.
// Both end when either side closes, and closing one side closes the other.
package zkrelay

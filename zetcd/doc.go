// Package zetcd is the ZooKeeper front: a server for the Apache ZooKeeper client protocol
// (Server), the seams it serves through (Handler, Session, Backend, EventSink: seams.go), and
// the decorators that wrap a Session through Forward (metrics, request logging). It knows
// ZooKeeper framing and sessions and nothing of how znodes are stored. Besides the client
// protocol it answers ZooKeeper's operator interfaces: the four-letter words on the client port
// (fourletter.go) and the AdminServer's HTTP commands (Server.AdminHandler, admin.go), both
// from the same figures. Package etcdstore implements Backend on etcd, xchk cross-checks it
// against a real ZooKeeper, and zetcd/zetcdtest is an in-memory fake for tests. It imports no
// etcd package (deps_test.go).
//
// # Request flow
//
//	accept → sniff a four-letter word, or read the ConnectRequest (44 or 45 bytes)
//	       → Backend.Connect opens or resumes the Session
//	       → ConnectResponse in the request's shape (36 or 37 bytes)
//	       → reader decodes each request frame
//	       → the session's executor calls the Handler method, one request at a time, in order
//	       → the Backend's work (etcd round trips, for etcdstore)
//	       → reply queued to the writer → frame written
//
// # Usage
//
//	srv := zetcd.NewServer(backend, zetcd.Config{Logger: log, Version: "3.9.0-zetcd"})
//	ln, _ := net.Listen("tcp", "127.0.0.1:2181")
//	go srv.Serve(ln)
//	...
//	srv.Shutdown(ctx) // drains: answers what was read, then detaches sessions
//	srv.Close()       // stops at once; also detaches sessions
//
// # Goroutines and ownership
//
// Server.Serve runs one accept loop per listener. Each accepted connection gets:
//
//   - The serve goroutine (Server.serveConn). It owns the socket: it alone closes it. It
//     reads the first four bytes; a four-letter word ("ruok", "srvr", ...) is answered and the
//     connection closed. Otherwise it reads the ConnectRequest, calls Backend.Connect (the
//     negotiated timeout is the request's clamped to [MinSessionTimeout, MaxSessionTimeout]),
//     records the session in the server's session table and becomes the reader: it reads
//     frames (bounded by MaxFrameBytes), touches the session on every packet, answers pings
//     at once (through the executor, in order, while enforced authentication may still
//     refuse them; sasl.go), runs a read itself when the backend answers it from memory and
//     nothing else of the connection executes (canReadHere), and queues every other request
//     to the executor, starting it when it is not running. When it stops, it tears the
//     connection down and settles the session. An idle connection is this goroutine alone,
//     waiting for its next bytes with no read buffer (readPrefix). After a quarter second
//     without a request the wait moves to a new goroutine (Server.awaitIdle), whose stack is
//     the runtime's smallest, 2 KiB, where the serving goroutine's stays at 4 KiB or more;
//     whichever goroutine the reader stops in tears down (Server.endConn).
//   - The executor (runExecutor). It takes requests from a bounded queue (128 requests, and
//     bytes; a full queue stops the reader, which stops reading the socket) and calls the
//     Session's Handler methods strictly one at a time in arrival order, through one table
//     from opcode to Handler method (dispatchTable). It runs only while requests are queued:
//     queuing one starts it if none runs, and it exits when it finds the queue empty
//     (execQueue). It queues each reply before taking the next request, so replies leave in
//     request order, and writes it itself when no other request waits (writeReplies). While a request that sets a watch
//     executes, the watch events handed to the connection are held and queued around its
//     reply (events.go), so that reply comes before any event of the watch it set. It also
//     runs the connection's SASL exchange and refuses requests for want of authentication
//     (sasl.go), as ZooKeeper does before its pipeline.
//   - The writer (runWriter). One writer at a time writes to the socket once the session is
//     open, and only while frames are queued (outQueue): a watch event starts a writer
//     goroutine if none runs; a reply or a ping answer is written by the goroutine that made
//     it, running runWriter itself, when no writer runs (clientConn.queue, flush), or by a
//     writer goroutine it starts while more requests wait. The writer exits when it finds the
//     queue empty. It writes each batch of encoded frames in one system call, gives each
//     frame's buffer back to encoding's frame pool once written, and it tracks the highest
//     zxid written on the connection: no reply carries a lower one (but auth's, zxid 0, and
//     Unimplemented's, -1, as ZooKeeper's). Pings and the errors the server makes itself
//     carry Session.LastZxid, whose watch events have been handed over (processedZxid).
//   - No goroutine waits for the session's end: the backend calls the connection back
//     (Session.AfterDone) when the session expires in the store or moves elsewhere.
//
// One file per role: handshake.go (first frame, Backend.Connect, runSession), reader.go,
// executor.go (with dispatchTable), writer.go, events.go, sasl.go; conn.go holds what they share (clientConn, its
// end reason, shutdown, teardown). The seams (Handler, Session, Backend, EventSink,
// StatsSource) are in seams.go. Decorators (Metrics.WrapBackend, WithLogging, the xchk
// cross-checker) turn one Invoker into a Session with Forward (forward.go), the only
// hand-written forwarder of the opcodes, and override only the life-cycle calls they need.
//
// An error on a connection closes that connection only. Each goroutine recovers from panics
// as a last line of defence, logging the stack and closing the connection.
//
// # Sessions
//
// A session lives in etcd, not in a connection, and may move between connections and zetcd
// processes. The server keeps a table of the sessions it serves or has detached:
//
//   - No packet within the session timeout (a read deadline on the socket): the connection is
//     closed, then Session.Expire is called.
//   - closeSession: Session.Close in order with the other requests, the reply, then the
//     connection is closed.
//   - The connection drops otherwise (client gone, protocol error, backend error): Session.Detach,
//     and an expiry timer for the last packet's time plus the timeout. If the client resumes
//     the session here before it fires, the timer is cancelled; when it fires, Session.Expire
//     is called (a no-op for a session resumed elsewhere). Unless the server closed the
//     connection for its own reasons, the requests read before the end (the client's EOF or
//     reset, a frame cut short, a bad length or header, a failed write) are executed first,
//     in order, as ZooKeeper executes every request it has read; their replies are written
//     as far as the socket still takes them.
//   - A session resumed here while another connection still serves it: that connection is
//     closed (its Session only detached) before the new one is answered.
//   - Server.Close: every Session is detached, none expired.
//   - Server.Shutdown (drain.go): each connection stops reading, executes and answers what it
//     has read, then closes; its Session is detached, none expired. Clients resume elsewhere.
//
// Life-cycle calls (Close, Expire, Detach) of a Session never run concurrently with its Handler
// methods: Close is made by the executor itself, Expire and Detach only once the executor has
// stopped.
package zetcd

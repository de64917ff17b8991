// Package xchk is zetcd's cross-check mode: a zetcd.Backend decorator that runs every session
// and request on zetcd and on a real ZooKeeper (the oracle) side by side, answers the client with
// one of them, and reports every difference as a structured log line and a Prometheus counter.
//
// It sits above the zetcd package and below the commands: encoding <- zetcd <- xchk <- cmd/*.
// zetcd never imports it.
//
// # Usage
//
//	xb, err := xchk.NewBackend(etcdBackend, xchk.Config{
//		OracleAddr: "127.0.0.1:2181",    // a real ZooKeeper with the same tree (e.g. fresh)
//		Answer:     xchk.AnswerZetcd,    // or AnswerZooKeeper
//		FailFast:   false,               // true: close a client's connection at its first difference
//		Logger:     log,
//		Registerer: reg,                 // default prometheus.DefaultRegisterer
//	})
//	srv := zetcd.NewServer(xb, cfg)
//	...
//	srv.Close()
//	xb.Close()
//
// cmd/zetcd exposes it as --oracle host:port, --oracle-answer zetcd|zookeeper and
// --oracle-fail-fast; internal/testkit/testenv runs the whole integration suite through it ("xchk"
// mode, fail-fast, against a fresh ZooKeeper), so any difference fails the test that caused it.
//
// # Sessions
//
// Each session the inner backend opens or resumes gets a twin session on the oracle, opened
// with the timeout zetcd negotiated (a different timeout from ZooKeeper is a difference) over
// its own TCP connection: a small pipelined client on the encoding package (handshake, ordered
// replies matched by xid, a ping every third of the timeout, xid -1 notifications captured).
// The client only ever sees zetcd's session id, password and timeout. A resumed session resumes
// its twin (a twin ZooKeeper refuses is a difference); a session this process never opened
// (resumed from another zetcd) has no twin and is not checked. closeSession closes both. A
// detached session's twin is kept alive, pinging, until zetcd expires the session, and is then
// closed on ZooKeeper at that moment, so both servers delete its ephemerals together; if zetcd
// never expires it here, the oracle connection is dropped after twice the timeout and ZooKeeper
// expires the twin by itself.
//
// # Requests
//
// Every Handler method (one per opcode, all through one Invoker via zetcd.Forward) sends the
// request to the twin, runs it on zetcd, waits for the twin's reply and compares:
//
//   - the error code. A Go error from zetcd (the server then closes the client's connection)
//     and ZooKeeper closing the twin's connection instead of answering (as it does for
//     deleteContainer from a client) are the same answer, "connection closed"; either one
//     against a reply is a difference;
//   - for writes (create*, delete*, setData, setACL, multi, closeSession), the reply zxid;
//   - the body, field by field, by reflection over the encoding records: data (null apart from
//     empty), children and ephemeral lists as sets (null apart from empty), ACL lists in order,
//     multi results (type, code, body), sequential names exactly (equal when both servers start
//     from the same tree), every Stat field except ctime and mtime;
//   - zxids relatively: each session keeps an order-preserving one-to-one pairing of the zxids
//     it saw on zetcd with those it saw at the same places on ZooKeeper. A pair is accepted when
//     both are new and sit in the same order relative to every known pair, or are already paired
//     with each other; zero pairs only with zero. This catches an mzxid or pzxid that did not
//     move, a failed write that consumed no zxid or two writes sharing one, without false alarms
//     from the revisions zetcd writes that ZooKeeper does not (a resumed session's key); it does
//     not compare the size of gaps. Read replies' zxids are not compared.
//   - ephemeralOwner through the session pairs: a zetcd session id must meet its twin's id.
//
// Watch events (the inner session's, through a wrapped EventSink, and the twin's xid -1
// frames) are paired by type, state and path; an event that finds no pair on the other side
// within Config.EventWait is a difference (op "notification", field "event").
//
// Writes (and session ends) hold a process-wide gate exclusively and reads share it, so
// concurrent sessions' writes reach both servers in the same order and no read sees one side
// changed and the other not. Cross-checked throughput is therefore not zetcd's.
//
// # Answers
//
// With AnswerZetcd (the default) the client gets zetcd's answers and events. With
// AnswerZooKeeper it gets ZooKeeper's, with zxids and session ids translated into those of its
// zetcd session (through the pairings above; the reply header keeps zetcd's zxid), and
// ZooKeeper's watch events; where ZooKeeper does not answer, zetcd's answer is used.
//
// # Reports
//
// Every difference is one Warn line "xchk: zetcd and ZooKeeper differ" with session, op, path
// (for a multi, the path of the op concerned), field (e.g. "stat.cversion", "results[1].err",
// "children", "event"), zetcd, zookeeper and, for zxid and owner pairings, detail; and one
// increment of zetcd_xchk_mismatches_total{op,field} (field without indices). With FailFast the
// Handler call returns a *MismatchError, which makes the server close the client's connection;
// an event difference, found later, does so at the session's next request.
//
// The oracle never blocks or crashes a client: it is given Config.OracleTimeout (default 2s) to
// open a twin and to answer each request. A twin that fails to open, or a request it does not
// answer in time (after which its session is no longer compared), is logged and counted under
// field "oracle", and the client is served by zetcd. zetcd_xchk_requests_total{op} counts
// requests seen.
//
// Config.Mutate is a hook for tests only: it changes zetcd's answer before the comparison so a
// test can introduce a divergence and see it reported.
package xchk

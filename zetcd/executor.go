package zetcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// dispatchFunc calls the Handler method for one opcode. req is the decoded body, of the type
// encoding.NewRequest returns for the opcode. A nil response means a header-only reply.
type dispatchFunc func(ctx context.Context, h Handler, req encoding.Record) (encoding.Record, encoding.Zxid, error)

// dispatchTable maps every opcode the server serves to its Handler method. An opcode without a
// row (and other than ping and closeSession, which the connection handles itself) is answered
// with Unimplemented and the connection is closed, as ZooKeeper does for requests it does not
// know. Adding a Handler method means adding its row here.
var dispatchTable = map[encoding.Op]dispatchFunc{
	encoding.OpCreate:       withBody(Handler.Create),
	encoding.OpDelete:       headerOnly(Handler.Delete),
	encoding.OpExists:       withBody(Handler.Exists),
	encoding.OpGetData:      withBody(Handler.GetData),
	encoding.OpSetData:      withBody(Handler.SetData),
	encoding.OpGetACL:       withBody(Handler.GetACL),
	encoding.OpSetACL:       withBody(Handler.SetACL),
	encoding.OpGetChildren:  withBody(Handler.GetChildren),
	encoding.OpSync:         withBody(Handler.Sync),
	encoding.OpGetChildren2: withBody(Handler.GetChildren2),
	encoding.OpCreate2:      withBody(Handler.Create2),

	encoding.OpSetWatches:    headerOnly(Handler.SetWatches),
	encoding.OpSetWatches2:   headerOnly(Handler.SetWatches2),
	encoding.OpAddWatch:      addWatchReply(Handler.AddWatch),
	encoding.OpCheckWatches:  headerOnly(Handler.CheckWatches),
	encoding.OpRemoveWatches: headerOnly(Handler.RemoveWatches),

	encoding.OpMulti:                withBody(Handler.Multi),
	encoding.OpMultiRead:            withBody(Handler.MultiRead),
	encoding.OpCreateContainer:      withBody(Handler.CreateContainer),
	encoding.OpCreateTTL:            withBody(Handler.CreateTTL),
	encoding.OpDeleteContainer:      headerOnly(Handler.DeleteContainer),
	encoding.OpGetEphemerals:        withBody(Handler.GetEphemerals),
	encoding.OpGetAllChildrenNumber: withBody(Handler.GetAllChildrenNumber),
	encoding.OpWhoAmI:               withBody(Handler.WhoAmI),
	encoding.OpReconfig:             withBody(Handler.Reconfig),
	encoding.OpSasl:                 withBody(Handler.Sasl),
	encoding.OpAuth:                 headerOnly(Handler.Auth),
}

// addWatchReply adapts AddWatch, whose success reply carries ErrorResponse{0} as its body.
func addWatchReply(m func(Handler, context.Context, *encoding.AddWatchRequest) (encoding.Zxid, error)) dispatchFunc {
	inner := headerOnly(m)
	return func(ctx context.Context, h Handler, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
		_, zxid, err := inner(ctx, h, req)
		if err != nil {
			return nil, zxid, err
		}
		return &encoding.ErrorResponse{Err: encoding.ErrOK}, zxid, nil
	}
}

// withBody adapts a Handler method whose success reply has a body.
func withBody[Req, Resp any, PResp interface {
	*Resp
	encoding.Record
}](m func(Handler, context.Context, *Req) (PResp, encoding.Zxid, error)) dispatchFunc {
	return func(ctx context.Context, h Handler, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
		r, ok := any(req).(*Req)
		if !ok {
			return nil, 0, fmt.Errorf("dispatch: request body is %T, want %T", req, r)
		}
		resp, zxid, err := m(h, ctx, r)
		if err != nil {
			return nil, zxid, err
		}
		if (*Resp)(resp) == nil {
			return nil, zxid, errors.New("handler returned neither a response nor an error")
		}
		return resp, zxid, nil
	}
}

// headerOnly adapts a Handler method whose success reply is the header alone.
func headerOnly[Req any](m func(Handler, context.Context, *Req) (encoding.Zxid, error)) dispatchFunc {
	return func(ctx context.Context, h Handler, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
		r, ok := any(req).(*Req)
		if !ok {
			return nil, 0, fmt.Errorf("dispatch: request body is %T, want %T", req, r)
		}
		zxid, err := m(h, ctx, r)
		return nil, zxid, err
	}
}

// requestKind says how the executor handles a request; the reader decides it.
type requestKind uint8

const (
	requestDispatch      requestKind = iota // body decoded; call the dispatchTable row
	requestCloseSession                     // closeSession: Session.Close, reply, close
	requestUnimplemented                    // no dispatchTable row: Unimplemented, close
	requestBadBody                          // body did not decode: MarshallingError
	requestDrop                             // refused without an answer: close the connection
	requestRefusedWrite                     // ZooKeeper refuses it as an error txn: MarshallingError at a zxid of its own
	requestPing                             // a ping the reader did not answer itself (sasl.go): answer it in order
	requestNotReadOnly                      // a write, sync or reconfig in a read-only session: NotReadOnly
)

// pendingRequest is a request read from the socket and waiting for the executor.
type pendingRequest struct {
	hdr      encoding.RequestHeader
	kind     requestKind
	body     encoding.Record // requestDispatch: the decoded body
	err      error           // requestBadBody, requestDrop: why
	received time.Time       // when the frame was read, for latency
	size     int64           // what it counts in the connection's queued bytes
}

// parseRequestBody classifies r by opcode and decodes its body. Bodies of opcodes the server
// does not serve are not decoded: they are answered with Unimplemented whatever they hold.
//
// ZooKeeper takes a zxid for a multi and for createSession before it decodes their bodies, so
// a multi that does not decode, and createSession inside a session with a body too short for a
// timeout, are refused as error transactions with a zxid of their own; any other body that does
// not decode consumes none.
func parseRequestBody(r *pendingRequest, body []byte) {
	op := r.hdr.Op
	switch op {
	case encoding.OpCloseSession:
		r.kind = requestCloseSession
		return
	case encoding.OpCreateSession:
		r.kind, r.err = requestRefusedWrite, errors.New("createSession inside a session")
		if len(body) >= 4 {
			// A body that holds a timeout is a CreateSessionTxn to ZooKeeper: it answers with
			// a ConnectResponse mid-session and renews the session for that timeout (0 ends
			// it). zetcd closes the connection instead.
			r.kind = requestDrop
		}
		return
	case encoding.OpPing:
		r.kind = requestPing
		return
	}
	if _, ok := dispatchTable[op]; !ok {
		r.kind = requestUnimplemented
		return
	}
	rec, ok := encoding.NewRequest(op)
	if !ok { // every dispatched opcode has a request record (TestServerDispatchTable)
		r.kind = requestUnimplemented
		return
	}
	null, err := encoding.DecodeRecordNulls(body, rec)
	switch {
	case err != nil && op == encoding.OpMulti:
		r.kind, r.err = requestRefusedWrite, err
	case err != nil && (op == encoding.OpAuth || op == encoding.OpSasl || op == encoding.OpDeleteContainer):
		// ZooKeeper reads auth and sasl bodies itself (processPacket), and one that does not
		// decode drops the connection; it drops a client's deleteContainer whatever the body
		// (etcdstore's DeleteContainer).
		r.kind, r.err = requestDrop, err
	case err != nil:
		r.kind, r.err = requestBadBody, err
	case null:
		r.kind, r.err, r.body = nullStringKind(op, rec), errNullString, rec
	default:
		r.kind, r.body = requestDispatch, rec
	}
}

// errNullString is why a request holding a null string is refused.
var errNullString = errors.New("a string of the request is null (length -1)")

// nullStringKind is how a request rec of op that decoded with a null ustring (length -1) is
// handled. ZooKeeper's Java code gets a null string there, and its answer is whatever the code
// does with a null (ZooKeeper 3.9.6, every op probed):
//   - sync echoes it (as null: its path decodes as encoding.NullString, which the reply encodes
//     back); getEphemerals lists every ephemeral; the watch requests, reconfig, and setData and
//     setACL's paths answer as for an empty string: the path is made "" here;
//   - the reads and delete fail on it with MarshallingError, consuming no zxid: so does zetcd;
//   - in creates, multi and setACL's ACL the answer depends on the field: a create's null path
//     is MarshallingError, an ACL's null scheme InvalidACL, a null id MarshallingError or
//     InvalidACL by scheme, a multi's null path MarshallingError. Those fields decode as
//     encoding.NullString, and the store answers them (znode.CheckCreateRequest, FixupACL).
func nullStringKind(op encoding.Op, rec encoding.Record) requestKind {
	switch op {
	case encoding.OpSync, encoding.OpGetEphemerals, encoding.OpAddWatch, encoding.OpCheckWatches,
		encoding.OpRemoveWatches, encoding.OpReconfig, encoding.OpAuth,
		encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL,
		encoding.OpMulti:
		return requestDispatch
	case encoding.OpSetData:
		nullPathEmpty(&rec.(*encoding.SetDataRequest).Path)
		return requestDispatch
	case encoding.OpSetACL:
		nullPathEmpty(&rec.(*encoding.SetACLRequest).Path) // BadArguments, before the ACL
		return requestDispatch
	case encoding.OpExists, encoding.OpGetData, encoding.OpGetACL, encoding.OpGetChildren,
		encoding.OpGetChildren2, encoding.OpGetAllChildrenNumber, encoding.OpMultiRead,
		encoding.OpDelete, encoding.OpSetWatches, encoding.OpSetWatches2:
		return requestBadBody
	}
	return requestDrop
}

// nullPathEmpty makes a null path (encoding.NullString) the empty one ZooKeeper takes it for.
func nullPathEmpty(path *string) {
	if *path == encoding.NullString {
		*path = ""
	}
}

// execQueue is the reader→executor queue: the executor runs only while requests are queued
// (workQueue), so requests still execute one at a time, in the order read. The reader bounds
// the queue (clientConn.inFull: maxOutstanding requests, and bytes). Closed when the executor
// stops for good, after a request that closes the connection, or by teardown: what is queued
// then is not executed (teardown uncounts it).
type execQueue = workQueue[*pendingRequest]

// requestSlices are the idle execQueues' slices.
var requestSlices slicePool[*pendingRequest]

// pushRequest queues r for the executor (c.runExecutor), starting it if none runs. It reports
// false, and does not queue r, once the executor has stopped for good.
func (c *clientConn) pushRequest(r *pendingRequest) bool { return c.exec.push(r, true) }

// runExecutor is the session's executor: it runs queued requests one at a time, in the order
// the reader read them, and queues each reply to the writer before taking the next request,
// so replies leave in request order. It exits when the queue is empty (execQueue). It stops
// for good at the first request after which the connection closes, and skips whatever is
// still queued once the connection is shutting down.
func (c *clientConn) runExecutor() {
	exited := false
	defer func() {
		if !exited {
			c.exec.exit()
		}
	}()
	defer c.recoverPanic("executor")
	for {
		r, ok := c.exec.takeOne()
		if !ok {
			exited = true // takeOne cleared running: another push starts another executor
			return
		}
		skip := c.ctx.Err() != nil || !c.awaitRoom(c.outFull, c.budget.outRoom, c.timeout)
		// Uncounted before it runs, so that no reply overtakes its request's count (srvr's
		// Outstanding); the one request executing is the only one not counted.
		c.dequeued(r)
		if skip {
			continue
		}
		more := c.execute(r)
		c.writeReplies()
		if !more {
			return
		}
	}
}

// writeReplies writes the frames execute queued (clientConn.queue): in this goroutine when no
// other request waits, so that a reply costs no switch to a writer goroutine; else a writer
// goroutine writes them, batching the replies of the requests that follow, while this one
// executes them.
func (c *clientConn) writeReplies() {
	if c.exec.waiting() {
		c.startWriter()
		return
	}
	c.flush()
}

// execute runs one request and queues its reply, for the caller to write (writeReplies). It
// reports false when the connection is to be closed after that reply (a closing frame has then
// been queued).
func (c *clientConn) execute(r *pendingRequest) bool {
	op, xid := r.hdr.Op, r.hdr.Xid
	if c.refuseUnauthenticated(r) {
		return false
	}
	switch r.kind {
	case requestPing:
		c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidPing, Zxid: c.processedZxid()}})
		return true
	case requestCloseSession:
		return c.closeSession(r)
	case requestUnimplemented:
		c.log.Warn("unimplemented request; answering Unimplemented and closing the connection",
			zap.Stringer("op", op), zap.Stringer("xid", xid))
		// ZooKeeper's UnimplementedRequestProcessor answers zxid -1, whatever was seen before.
		c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: xid, Zxid: -1, Err: encoding.ErrUnimplemented}, exactZxid: true, closeAfter: true})
		return false
	case requestDrop:
		c.log.Warn("request refused; closing the connection", zap.Stringer("op", op),
			zap.Error(fmt.Errorf("session %v: %v request: %w", c.id, op, r.err)))
		c.queue(outFrame{noFrame: true, closeAfter: true})
		return false
	case requestBadBody:
		c.log.Warn("undecodable request; answering MarshallingError", zap.Stringer("op", op),
			zap.Error(fmt.Errorf("session %v: decode %v request: %w", c.id, op, r.err)))
		c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: xid, Zxid: c.processedZxid(), Err: encoding.ErrMarshallingError}})
		return true
	case requestRefusedWrite:
		return c.refuseWrite(r)
	case requestNotReadOnly:
		// At the last processed zxid, as ReadOnlyRequestProcessor answers.
		c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: xid, Zxid: c.processedZxid(), Err: encoding.ErrNotReadOnly}})
		return true
	}

	if op == encoding.OpSasl && c.s.cfg.Auth.NewSASLServer != nil {
		return c.saslStep(r)
	}
	reply := c.reply
	if op == encoding.OpAuth {
		// ZooKeeper answers auth with zxid 0, whatever the connection has seen.
		reply = func(f outFrame) { f.exactZxid = true; c.reply(f) }
	}
	c.holdEvents(op, r.body)
	resp, zxid, err := dispatchTable[op](c.ctx, c.sess, r.body)
	if werr := c.sess.AwaitEvents(c.ctx, zxid); werr != nil && c.ctx.Err() == nil {
		c.log.Warn("reply sent without waiting for its watch events", zap.Stringer("op", op),
			zap.Error(fmt.Errorf("session %v: await events <= %v: %w", c.id, zxid, werr)))
	}
	c.observeRequest(r, zxid, err)
	if auth, ok := r.body.(*encoding.AuthPacket); ok && err == nil {
		c.holdScheme(auth.Scheme)
	}
	if err != nil {
		if code, ok := errCode(err); ok {
			if op == encoding.OpAuth && code == encoding.ErrAuthFailed {
				// ZooKeeper answers a failed auth and closes the connection; the session
				// survives, for the client to resume (Handler.Auth).
				c.log.Info("authentication failed; closing the connection")
				reply(outFrame{hdr: encoding.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}, closeAfter: true})
				return false
			}
			reply(outFrame{hdr: encoding.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}})
			return true
		}
		reply(c.unserved(op, err))
		return false
	}
	reply(outFrame{hdr: encoding.ReplyHeader{Xid: xid, Zxid: zxid}, body: resp})
	return true
}

// unserved is the frame that closes the connection after a request that could not be served
// at all (a Go error, not a ZooKeeper code): no reply, after the replies already queued; the
// session survives for the client to resume. A cancelled context is the connection already
// closing, not a failure, and is not logged; ErrNotServing is a state of the server (etcd out
// of reach), not a fault of the request or of zetcd, and is a warning.
func (c *clientConn) unserved(op encoding.Op, err error) outFrame {
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, ErrNotServing):
		c.log.Warn("request not served; closing the connection", zap.Stringer("op", op),
			zap.Error(fmt.Errorf("session %v: %v: %w", c.id, op, err)))
	default:
		c.log.Error("request failed; closing the connection", zap.Stringer("op", op),
			zap.Error(fmt.Errorf("session %v: %v: %w", c.id, op, err)))
	}
	return outFrame{noFrame: true, closeAfter: true}
}

// refuseWrite answers a request ZooKeeper refuses as an error transaction: MarshallingError at
// the zxid the backend consumes for it.
func (c *clientConn) refuseWrite(r *pendingRequest) bool {
	op := r.hdr.Op
	c.log.Info("undecodable write; answering MarshallingError", zap.Stringer("op", op),
		zap.Error(fmt.Errorf("session %v: decode %v request: %w", c.id, op, r.err)))
	zxid, err := c.sess.RefuseWrite(c.ctx, op)
	c.observeRequest(r, zxid, err)
	if _, ok := errCode(err); err != nil && !ok {
		c.queue(c.unserved(op, err))
		return false
	}
	c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: r.hdr.Xid, Zxid: zxid, Err: encoding.ErrMarshallingError}})
	return true
}

// closeSession ends the session at the client's request, replies, and closes the connection.
// Session.Close gets the server's context, not the connection's: a client that sends
// closeSession and hangs up at once still has its session closed.
func (c *clientConn) closeSession(r *pendingRequest) bool {
	ctx, cancel := context.WithTimeout(c.s.ctx, lifecycleTimeout)
	zxid, err := c.sess.Close(ctx)
	cancel()
	c.observeRequest(r, zxid, err)
	if err != nil {
		if code, ok := errCode(err); ok {
			c.log.Warn("closeSession refused", zap.Stringer("code", code))
			c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: r.hdr.Xid, Zxid: zxid, Err: code}, closeAfter: true})
			return false
		}
		c.queue(c.unserved(encoding.OpCloseSession, err))
		return false
	}
	c.setEnd(endClosed)
	c.queue(outFrame{hdr: encoding.ReplyHeader{Xid: r.hdr.Xid, Zxid: zxid}, closeAfter: true})
	return false
}

// errCode reports whether err is a ZooKeeper error code to send to the client. ErrOK is not
// one: a handler returning it as an error has broken the Handler contract.
func errCode(err error) (encoding.ErrCode, bool) {
	var code encoding.ErrCode
	if errors.As(err, &code) && code != encoding.ErrOK {
		return code, true
	}
	return 0, false
}

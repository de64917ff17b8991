package xchk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// session is one connection's hold on a cross-checked session: the inner zetcd.Session and
// the oracle connection of its twin.
//
// Handler methods run on the connection's executor, one at a time (zetcd.Handler contract).
// mu protects oracle, failure, detached and orphan, which event callbacks, timers and the
// life-cycle methods also touch.
type session struct {
	zetcd.Session // zetcd.Forward(inner, s.call): the Handler; life-cycle overrides below
	b             *Backend
	inner         zetcd.Session
	local         zetcd.Invoker   // zetcd.Call(inner)
	sink          zetcd.EventSink // the client connection's
	pair          *pair           // set by Backend.attach before the session is returned
	gen           uint64
	events        *eventMatcher

	mu       sync.Mutex
	oracle   *oracleConn // nil: not cross-checked (no twin, or the twin was lost)
	failure  error       // FailFast: a difference found outside a Handler call (watch events)
	detached bool
	orphan   *time.Timer // closes a detached session's oracle connection if it is never ended
	warned   bool        // an oracle failure of this session has been logged at Warn level
}

var _ zetcd.Session = (*session)(nil)

// ReadyToRead is false: a cross-checked read also asks the oracle, over the network.
func (s *session) ReadyToRead() bool { return false }

// setInner makes in the session zetcd serves this connection's requests on: every Handler
// method becomes call with in's method as the local side.
func (s *session) setInner(in zetcd.Session) {
	s.inner = in
	s.local = zetcd.Call(in)
	s.Session = zetcd.Forward(in, s.call)
}

// MismatchError is what a Handler method returns under Config.FailFast when the answers
// differ: not an encoding.ErrCode, so the server closes the client's connection.
type MismatchError struct {
	Session encoding.SessionID
	Op      encoding.Op
	Path    string
	Field   string
	Zetcd   string
	ZK      string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("xchk: session %v: %v %q: %s differs: zetcd %s, zookeeper %s",
		e.Session, e.Op, e.Path, e.Field, e.Zetcd, e.ZK)
}

// zetcdSink receives the inner session's watch events.
type zetcdSink struct{ s *session }

func (z zetcdSink) Event(ev encoding.WatcherEvent, zxid encoding.Zxid) { z.s.zetcdEvent(ev, zxid) }

func (s *session) zetcdEvent(ev encoding.WatcherEvent, zxid encoding.Zxid) {
	checked := s.liveOracle() != nil
	if s.b.cfg.Answer == AnswerZetcd || !checked {
		s.sink.Event(ev, zxid)
	}
	if checked {
		s.events.add(sideZetcd, ev)
	}
}

// unpairedEvent reports an event seen on one side only. Under FailFast the session's next
// request closes the connection.
func (s *session) unpairedEvent(side int, ev encoding.WatcherEvent) {
	got := ev.Type.String()
	if ev.State != encoding.StateSyncConnected {
		got += " (" + ev.State.String() + ")"
	}
	d := difference{field: "event", zetcd: "none", zk: "none", detail: "no matching event within " + s.b.cfg.EventWait.String()}
	if side == sideZetcd {
		d.zetcd = got
	} else {
		d.zk = got
	}
	if err := s.report(encoding.OpNotification, ev.Path, []difference{d}); err != nil {
		s.fail(err)
	}
}

// oracleEvent receives the twin's watch events, on the oracle connection's reader goroutine:
// an event read before a reply is handed on before that reply is delivered.
func (s *session) oracleEvent(ev encoding.WatcherEvent) {
	if s.liveOracle() == nil {
		return
	}
	if s.b.cfg.Answer == AnswerZooKeeper {
		s.sink.Event(ev, -1) // ZooKeeper's notifications carry no zxid
	}
	s.events.add(sideZooKeeper, ev)
}

func (s *session) setOracle(oc *oracleConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oracle = oc
}

// liveOracle returns the twin's connection, or nil when the session is not cross-checked.
func (s *session) liveOracle() *oracleConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached || s.oracle == nil || s.oracle.dead() {
		return nil
	}
	return s.oracle
}

// dropOracle stops cross-checking this connection and closes its oracle connection.
func (s *session) dropOracle() {
	s.mu.Lock()
	oc := s.oracle
	s.oracle = nil
	if s.orphan != nil {
		s.orphan.Stop()
		s.orphan = nil
	}
	s.mu.Unlock()
	s.events.stop()
	if oc != nil {
		oc.close()
	}
}

// fail makes the session's next Handler call return err (FailFast, for differences found
// outside a Handler call).
func (s *session) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
	}
}

func (s *session) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// report logs and counts diffs. Under FailFast it returns a *MismatchError for the first.
func (s *session) report(op encoding.Op, path string, diffs []difference) error {
	for _, d := range diffs {
		s.b.m.mismatches.WithLabelValues(op.String(), d.label()).Inc()
		fields := []zap.Field{
			zap.Stringer("session", s.inner.ID()), zap.Stringer("op", op), zap.String("path", pathFor(path, d.field)),
			zap.String("field", d.field), zap.String("zetcd", d.zetcd), zap.String("zookeeper", d.zk),
		}
		if d.detail != "" {
			fields = append(fields, zap.String("detail", d.detail))
		}
		s.b.log.Warn("xchk: zetcd and ZooKeeper differ", fields...)
	}
	if len(diffs) == 0 || !s.b.cfg.FailFast {
		return nil
	}
	d := diffs[0]
	return &MismatchError{Session: s.inner.ID(), Op: op, Path: pathFor(path, d.field), Field: d.field, Zetcd: d.zetcd, ZK: d.zk}
}

// uncompared counts (field "oracle") and logs a request or session that could not be
// cross-checked. The first such failure of a session is logged at Warn level, later ones at
// Debug.
func (s *session) uncompared(op encoding.Op, path string, err error) {
	s.b.m.mismatches.WithLabelValues(op.String(), FieldOracle).Inc()
	s.mu.Lock()
	first := !s.warned
	s.warned = true
	s.mu.Unlock()
	log := s.b.log.Debug
	if first {
		log = s.b.log.Warn
	}
	log("xchk: not cross-checked", zap.Stringer("session", s.inner.ID()), zap.Stringer("op", op),
		zap.String("path", path), zap.String("field", FieldOracle), zap.Error(err))
}

// writeOps are the opcodes that change the tree. Their reply zxid is their own transaction's
// (also when they fail), so it is paired like a Stat zxid; reads answer with the newest zxid
// the server has, which the two servers need not agree on. They hold the gate exclusively, so
// concurrent sessions' writes reach both servers in the same order (sequential names, zxid
// order) and no read sees one side written and the other not.
var writeOps = map[encoding.Op]bool{
	encoding.OpCreate: true, encoding.OpCreate2: true, encoding.OpCreateContainer: true, encoding.OpCreateTTL: true,
	encoding.OpDelete: true, encoding.OpDeleteContainer: true, encoding.OpSetData: true, encoding.OpSetACL: true,
	encoding.OpMulti: true, encoding.OpCloseSession: true,
}

// call runs one request on zetcd and on the twin, in that order on each side's session, and
// compares the answers. It is the Invoker every Handler method goes through (zetcd.Forward).
// The request is sent to the oracle first (without waiting), so the two round trips overlap.
func (s *session) call(ctx context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
	if err := s.failed(); err != nil {
		return nil, 0, err
	}
	if writeOps[op] {
		s.b.gate.Lock()
		defer s.b.gate.Unlock()
	} else {
		s.b.gate.RLock()
		defer s.b.gate.RUnlock()
	}
	s.b.m.requests.WithLabelValues(op.String()).Inc()

	path := zetcd.RequestPath(req)
	oc := s.liveOracle()
	var pending *oracleCall
	if oc != nil {
		pending = oc.start(op, s.toOracle(req))
	}
	bodiless := headerOnly(op)
	resp, zxid, err := s.local(ctx, op, req)
	if bodiless {
		resp = nil // addWatch's ErrorResponse{0} carries nothing to compare
	}
	if mutate := s.b.cfg.Mutate; mutate != nil {
		if resp, err = mutated(mutate, op, resp, err); err != nil && isTypeError(err) {
			return nil, zxid, err
		}
	}
	if pending == nil {
		s.uncompared(op, path, errors.New("no twin session"))
		return resp, zxid, err
	}
	octx, cancel := context.WithTimeout(ctx, s.b.cfg.OracleTimeout)
	khdr, kresp, kerr := pending.wait(octx)
	cancel()
	if ctx.Err() != nil {
		return resp, zxid, err // connection closing: nothing to compare or report
	}
	if kerr != nil {
		// Either way the twin's connection is gone: stop comparing this connection.
		s.dropOracle()
		if !errors.Is(kerr, errOracleHungUp) {
			// Whether ZooKeeper applied the request is unknown.
			s.uncompared(op, path, kerr)
			return resp, zxid, err
		}
		// ZooKeeper closed the connection instead of answering: the same answer as a Go error
		// from zetcd (the server closes the client's connection), and any other is a difference.
		if _, isCode := errCode(err); err != nil && !isCode {
			return resp, zxid, err
		}
		code, _ := errCode(err)
		diff := difference{field: "err", zetcd: code.String(), zk: "connection closed", detail: kerr.Error()}
		if ferr := s.report(op, path, []difference{diff}); ferr != nil {
			return nil, zxid, ferr
		}
		return resp, zxid, err
	}
	s.pair.zxids.replied(zxid, khdr.Zxid)
	diffs := s.compare(op, resp, zxid, err, khdr, kresp, bodiless)
	if ferr := s.report(op, path, diffs); ferr != nil {
		return nil, zxid, ferr
	}
	if s.b.cfg.Answer == AnswerZooKeeper {
		return fromZooKeeper(s, zxid, err, khdr, kresp, bodiless)
	}
	return resp, zxid, err
}

// headerOnly reports whether op's success reply carries no data to compare: encoding's
// response record for it is Empty, or, for addWatch, ErrorResponse{0}.
func headerOnly(op encoding.Op) bool {
	r, _ := encoding.NewResponse(op)
	switch r.(type) {
	case *encoding.Empty, *encoding.ErrorResponse:
		return true
	}
	return false
}

// compare returns the differences between zetcd's answer and the oracle's: error code; the
// reply zxid of writes; the body, field by field.
func (s *session) compare(op encoding.Op, zresp encoding.Record, zzxid encoding.Zxid, zerr error,
	khdr encoding.ReplyHeader, kresp encoding.Record, bodiless bool) []difference {
	d := &differ{zxids: s.pair.zxids, owners: s.b.owners}
	zcode := encoding.ErrOK
	if zerr != nil {
		var ok bool
		if zcode, ok = errCode(zerr); !ok {
			d.add("err", zerr.Error(), khdr.Err.String(), "zetcd did not answer")
			return d.diffs
		}
	}
	if zcode != khdr.Err {
		d.add("err", zcode.String(), khdr.Err.String(), "")
		return d.diffs
	}
	if writeOps[op] {
		d.value("zxid", reflect.ValueOf(zzxid), reflect.ValueOf(khdr.Zxid))
	}
	if zcode == encoding.ErrOK && !bodiless {
		d.records("", zresp, kresp)
	}
	return d.diffs
}

// fromZooKeeper turns the oracle's answer into the client's, in the numbering of the client's
// zetcd session: zxids through the session's zxidMap, session ids through the ownerMap. The
// reply zxid stays zetcd's whenever zetcd answered, so the connection's zxids keep rising.
//
// The response's type is checked by zetcd.Forward's method, as for zetcd's own answer.
func fromZooKeeper(s *session, zzxid encoding.Zxid, zerr error,
	khdr encoding.ReplyHeader, kresp encoding.Record, bodiless bool) (encoding.Record, encoding.Zxid, error) {
	zxid := zzxid
	if _, ok := errCode(zerr); (zerr != nil && !ok) || zxid == 0 {
		zxid = s.pair.zxids.toZetcd(khdr.Zxid)
	}
	if khdr.Err != encoding.ErrOK {
		return nil, zxid, khdr.Err
	}
	if bodiless || kresp == nil {
		return nil, zxid, nil
	}
	rewrite(kresp, s.pair.zxids.toZetcd, s.b.owners.toZetcd)
	return kresp, zxid, nil
}

// toOracle returns the request to send to the twin: the client's, with zetcd zxids translated
// into ZooKeeper's (setWatches' relativeZxid). It never modifies req.
func (s *session) toOracle(req encoding.Record) encoding.Record {
	switch r := req.(type) {
	case *encoding.SetWatches:
		c := *r
		c.RelativeZxid = s.pair.zxids.toZooKeeper(r.RelativeZxid)
		return &c
	case *encoding.SetWatches2:
		c := *r
		c.RelativeZxid = s.pair.zxids.toZooKeeper(r.RelativeZxid)
		return &c
	}
	return req
}

// errTypeMismatch marks a Mutate hook that returned a record of the wrong type.
var errTypeMismatch = errors.New("xchk: Mutate returned a record of the wrong type")

func isTypeError(err error) bool { return errors.Is(err, errTypeMismatch) }

// mutated applies the test-only Mutate hook to zetcd's answer. The hook must answer with
// encoding's response type for op (Empty for a header-only op), or with nil.
func mutated(mutate func(encoding.Op, encoding.Record, error) (encoding.Record, error),
	op encoding.Op, resp encoding.Record, err error) (encoding.Record, error) {
	out, err := mutate(op, resp, err)
	if out == nil {
		return nil, err
	}
	want, _ := encoding.NewResponse(op)
	if headerOnly(op) {
		want = &encoding.Empty{}
	}
	if reflect.TypeOf(out) != reflect.TypeOf(want) {
		return nil, fmt.Errorf("%w: %T", errTypeMismatch, out)
	}
	return out, err
}

func errCode(err error) (encoding.ErrCode, bool) {
	var code encoding.ErrCode
	if errors.As(err, &code) {
		return code, true
	}
	return 0, false
}

// pathFor narrows a multi's comma-separated paths to the op a field "results[i]..." is about.
func pathFor(path, field string) string {
	rest, ok := strings.CutPrefix(field, "results[")
	if !ok {
		return path
	}
	idx, _, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(idx)
	if !ok || err != nil {
		return path
	}
	if paths := strings.Split(path, ","); i < len(paths) {
		return paths[i]
	}
	return path
}

// Life cycle.

// ID, Password, Timeout, AwaitEvents and Done are zetcd's (Forward): the client's connection
// follows the zetcd session.

// Close ends the session on both sides at once (closeSession), holding the gate so no other
// session compares a state where only one side has ended it, and compares the outcomes.
func (s *session) Close(ctx context.Context) (encoding.Zxid, error) {
	s.b.gate.Lock()
	defer s.b.gate.Unlock()
	oc := s.liveOracle()
	var khdr encoding.ReplyHeader
	var kerr error
	twin := make(chan struct{})
	go func() {
		defer close(twin)
		if oc == nil {
			return
		}
		octx, cancel := context.WithTimeout(ctx, s.b.cfg.OracleTimeout)
		defer cancel()
		khdr.Zxid, kerr = oc.closeSession(octx)
		if code, ok := errCode(kerr); ok {
			khdr.Err, kerr = code, nil
		}
	}()
	zxid, err := s.inner.Close(ctx)
	<-twin
	s.dropOracle()
	s.b.forget(s)
	switch {
	case oc == nil:
		s.uncompared(encoding.OpCloseSession, "", errors.New("no twin session"))
	case kerr != nil:
		s.uncompared(encoding.OpCloseSession, "", kerr)
	default:
		diffs := s.compare(encoding.OpCloseSession, nil, zxid, err, khdr, nil, true)
		if ferr := s.report(encoding.OpCloseSession, "", diffs); ferr != nil {
			return zxid, ferr
		}
	}
	return zxid, err
}

// Expire ends the session on both sides when zetcd expires it: the twin is kept alive by the
// oracle connection's pings until then, so both servers delete the session's ephemerals at the
// same moment. A connection whose session was resumed since only closes its oracle connection.
func (s *session) Expire(ctx context.Context) error {
	s.b.gate.Lock()
	defer s.b.gate.Unlock()
	if !s.b.isCurrent(s) {
		s.dropOracle()
		return s.inner.Expire(ctx)
	}
	s.mu.Lock()
	oc := s.oracle
	s.mu.Unlock()
	twin := make(chan error, 1)
	go func() { twin <- s.endTwin(ctx, oc) }()
	err := s.inner.Expire(ctx)
	if terr := <-twin; terr != nil && !errors.Is(terr, errOracleExpired) {
		s.uncompared(encoding.OpCloseSession, "", terr)
	}
	s.dropOracle()
	s.b.forget(s)
	return err
}

// endTwin closes the twin session: on its connection if that is still up, else on a new one.
func (s *session) endTwin(ctx context.Context, oc *oracleConn) error {
	ctx, cancel := context.WithTimeout(ctx, s.b.cfg.OracleTimeout)
	defer cancel()
	if oc == nil || oc.dead() {
		kid, kpasswd := s.b.twinCredentials(s)
		if kid == 0 {
			return nil
		}
		var err error
		oc, _, err = dialOracle(ctx, s.b.cfg.OracleAddr, encoding.ConnectRequest{
			SessionID: kid, Passwd: kpasswd, TimeOut: int32(s.inner.Timeout() / time.Millisecond),
		}, s.b.cfg.OracleTimeout, nil)
		if err != nil {
			return err
		}
	}
	_, err := oc.closeSession(ctx)
	return err
}

// Detach stops comparing this connection (its watches are gone on both sides) but keeps the
// twin session alive, pinging, until zetcd expires the session or the client resumes it. If
// neither happens within twice the timeout (the zetcd server was closed, or the session was
// resumed on another zetcd process), the oracle connection is closed and ZooKeeper expires the
// twin by itself.
func (s *session) Detach() {
	s.inner.Detach()
	s.events.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return
	}
	s.detached = true
	if s.oracle != nil && !s.oracle.dead() {
		s.orphan = time.AfterFunc(2*s.inner.Timeout()+s.b.cfg.OracleTimeout, func() {
			s.dropOracle()
			s.b.forget(s)
		})
	}
}

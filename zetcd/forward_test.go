package zetcd

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// dispatchedOps returns the opcodes of dispatchTable in a stable order.
func dispatchedOps() []encoding.Op {
	ops := make([]encoding.Op, 0, len(dispatchTable))
	for op := range dispatchTable {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	return ops
}

// headerOnlyOp reports whether op's success reply carries no data: encoding's response record
// for it is Empty, or, for addWatch, ErrorResponse{0}.
func headerOnlyOp(op encoding.Op) bool {
	r, _ := encoding.NewResponse(op)
	switch r.(type) {
	case *encoding.Empty, *encoding.ErrorResponse:
		return true
	}
	return false
}

// call is one Invoker call a test saw.
type call struct {
	op  encoding.Op
	req encoding.Record
}

// scriptedInvoker answers every op with a fresh response of encoding's type for it at zxid 7,
// or with err if set, and records what it was asked.
type scriptedInvoker struct {
	err   error
	calls []call
	resps []encoding.Record
}

func (s *scriptedInvoker) invoke(_ context.Context, op encoding.Op, req encoding.Record) (encoding.Record, encoding.Zxid, error) {
	s.calls = append(s.calls, call{op, req})
	if s.err != nil {
		return nil, 7, s.err
	}
	resp, _ := encoding.NewResponse(op)
	s.resps = append(s.resps, resp)
	return resp, 7, nil
}

// TestDispatchTableCoversHandler: one row per Handler method, so iterating over dispatchTable
// reaches every method of a Session.
func TestDispatchTableCoversHandler(t *testing.T) {
	if n := reflect.TypeFor[Handler]().NumMethod(); len(dispatchTable) != n {
		t.Fatalf("dispatchTable has %d rows, Handler %d methods", len(dispatchTable), n)
	}
}

// TestForwardReachesInvoker: every Handler method of Forward's Session calls the Invoker once,
// with its own opcode and the request it was given, and returns the Invoker's response typed
// (header-only methods drop it).
func TestForwardReachesInvoker(t *testing.T) {
	ctx := context.Background()
	for _, op := range dispatchedOps() {
		inv := &scriptedInvoker{}
		s := Forward(nil, inv.invoke)
		req, ok := encoding.NewRequest(op)
		if !ok {
			t.Fatalf("%v: no request record", op)
		}
		resp, zxid, err := dispatchTable[op](ctx, s, req)
		if err != nil || zxid != 7 {
			t.Errorf("%v: zxid %v, err %v; want 7, nil", op, zxid, err)
			continue
		}
		if len(inv.calls) != 1 || inv.calls[0].op != op || inv.calls[0].req != req {
			t.Errorf("%v: Invoker calls %+v, want one with op %v and request %p", op, inv.calls, op, req)
			continue
		}
		switch {
		case op == encoding.OpAddWatch:
			if r, ok := resp.(*encoding.ErrorResponse); !ok || r.Err != encoding.ErrOK {
				t.Errorf("%v: reply body %#v, want ErrorResponse{0}", op, resp)
			}
		case headerOnlyOp(op):
			if resp != nil {
				t.Errorf("%v: reply body %#v, want none", op, resp)
			}
		case resp != inv.resps[0]:
			t.Errorf("%v: reply body %p, want the Invoker's %p", op, resp, inv.resps[0])
		}
	}
}

// TestForwardErrors: an Invoker's error reaches the caller with its zxid, and a body of the
// wrong type is a Go error (not a ZooKeeper code) for the methods that have a body.
func TestForwardErrors(t *testing.T) {
	ctx := context.Background()
	for _, op := range dispatchedOps() {
		req, _ := encoding.NewRequest(op)
		inv := &scriptedInvoker{err: encoding.ErrNoNode}
		_, zxid, err := dispatchTable[op](ctx, Forward(nil, inv.invoke), req)
		if !errors.Is(err, encoding.ErrNoNode) || zxid != 7 {
			t.Errorf("%v: zxid %v, err %v; want 7, NoNode", op, zxid, err)
		}
		if headerOnlyOp(op) {
			continue
		}
		wrong := Forward(nil, func(context.Context, encoding.Op, encoding.Record) (encoding.Record, encoding.Zxid, error) {
			return &encoding.WatcherEvent{}, 7, nil
		})
		if _, _, err := dispatchTable[op](ctx, wrong, req); err == nil {
			t.Errorf("%v: a WatcherEvent body was accepted", op)
		} else if _, isCode := errCode(err); isCode {
			t.Errorf("%v: wrong body type gave ZooKeeper code %v, want a Go error", op, err)
		}
	}
}

// lifecycleSession records its life-cycle calls; its Handler methods are an Invoker's.
type lifecycleSession struct {
	Session
	calls []string
	done  chan struct{}
}

func (s *lifecycleSession) ID() encoding.SessionID { s.calls = append(s.calls, "ID"); return 0x42 }
func (s *lifecycleSession) Password() []byte {
	s.calls = append(s.calls, "Password")
	return []byte("pw")
}
func (s *lifecycleSession) Timeout() time.Duration {
	s.calls = append(s.calls, "Timeout")
	return 5 * time.Second
}
func (s *lifecycleSession) AwaitEvents(ctx context.Context, zxid encoding.Zxid) error {
	s.calls = append(s.calls, "AwaitEvents")
	return errors.New("await")
}
func (s *lifecycleSession) Close(ctx context.Context) (encoding.Zxid, error) {
	s.calls = append(s.calls, "Close")
	return 9, nil
}
func (s *lifecycleSession) Expire(ctx context.Context) error {
	s.calls = append(s.calls, "Expire")
	return errors.New("expire")
}
func (s *lifecycleSession) Done() <-chan struct{} { s.calls = append(s.calls, "Done"); return s.done }
func (s *lifecycleSession) Err() error {
	s.calls = append(s.calls, "Err")
	return ErrNotServing
}
func (s *lifecycleSession) Detach() { s.calls = append(s.calls, "Detach") }
func (s *lifecycleSession) AfterDone(f func()) func() bool {
	s.calls = append(s.calls, "AfterDone")
	return AfterClose(s.done, f)
}

// TestForwardLifecycle: the life-cycle methods reach inner and never the Invoker.
func TestForwardLifecycle(t *testing.T) {
	ctx := context.Background()
	inv := &scriptedInvoker{}
	inner := &lifecycleSession{Session: Forward(nil, inv.invoke), done: make(chan struct{})}
	s := Forward(inner, inv.invoke)
	if s.ID() != 0x42 || string(s.Password()) != "pw" || s.Timeout() != 5*time.Second ||
		s.AwaitEvents(ctx, 1) == nil || s.Done() != inner.done || s.Err() != ErrNotServing {
		t.Error("ID, Password, Timeout, AwaitEvents, Done or Err did not return inner's answer")
	}
	if z, err := s.Close(ctx); z != 9 || err != nil {
		t.Errorf("Close = %v, %v; want inner's 9, nil", z, err)
	}
	if s.Expire(ctx) == nil {
		t.Error("Expire did not return inner's error")
	}
	s.Detach()
	if stop := s.AfterDone(func() {}); !stop() {
		t.Error("AfterDone's stop did not stop inner's registration")
	}
	want := []string{"ID", "Password", "Timeout", "AwaitEvents", "Done", "Err", "Close", "Expire", "Detach", "AfterDone"}
	if !reflect.DeepEqual(inner.calls, want) {
		t.Errorf("inner saw %v, want %v", inner.calls, want)
	}
	if len(inv.calls) != 0 {
		t.Errorf("life-cycle calls reached the Invoker: %+v", inv.calls)
	}
}

// TestForwardCallIsTransparent: Forward(s, Call(s)) answers every opcode exactly as s does,
// for a success, a ZooKeeper error and a Go error.
func TestForwardCallIsTransparent(t *testing.T) {
	ctx := context.Background()
	for _, fail := range []error{nil, encoding.ErrNodeExists, errors.New("etcd unreachable")} {
		for _, op := range dispatchedOps() {
			inv := &scriptedInvoker{err: fail}
			s := &lifecycleSession{done: make(chan struct{})}
			s.Session = Forward(s, inv.invoke)
			outer := Forward(s, Call(s))
			req, _ := encoding.NewRequest(op)

			wresp, wzxid, werr := dispatchTable[op](ctx, s, req)
			gresp, gzxid, gerr := dispatchTable[op](ctx, outer, req)
			if len(inv.calls) != 2 || inv.calls[1] != inv.calls[0] {
				t.Errorf("%v (%v): inner calls %+v, want the same call twice", op, fail, inv.calls)
				continue
			}
			if gzxid != wzxid || gerr != werr {
				t.Errorf("%v (%v): got %v, %v; want %v, %v", op, fail, gzxid, gerr, wzxid, werr)
			}
			if fail == nil && !headerOnlyOp(op) && gresp != inv.resps[1] {
				t.Errorf("%v: got body %p, want s's %p", op, gresp, inv.resps[1])
			}
			if !reflect.DeepEqual(gresp, wresp) {
				t.Errorf("%v (%v): got body %#v, want %#v", op, fail, gresp, wresp)
			}
		}
	}
	s := &lifecycleSession{done: make(chan struct{})}
	s.Session = Forward(s, Call(nil))
	if outer := Forward(s, Call(s)); outer.ID() != 0x42 || outer.Done() != s.done {
		t.Error("life cycle of Forward(s, Call(s)) is not s's")
	}
}

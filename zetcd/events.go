package zetcd

import (
	"sync"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// Watch events and replies share one queue to the writer; their order there is ZooKeeper's
// (docs/design.md, "Watches") only if two rules hold:
//
//   - a client sees an event before any reply that reflects the change that fired it: the
//     executor waits for the backend to have handed over every event up to the reply's zxid
//     (Session.AwaitEvents) before it queues the reply;
//   - the reply of a request that sets a watch comes before any event of that watch: the Java
//     client registers a watch when that reply arrives, and drops an event that matches no
//     registered watch, so a one-shot watch whose event came first is lost for good.
//
// The backend may fire a watch at any moment after arming it, also while the request that
// set it is still executing (a change made by another session meanwhile, or replayed from
// the feed's history). So while a request that sets a watch executes, the connection holds
// back the events it is handed, and queues them around the reply: those of changes up to the
// reply's zxid before it (the reply reflects them), the later ones after it (the watch the
// request set was armed at the state its answer reflects, so it fires only for later changes;
// an older watch firing for such a change may as well have fired after the reply). Catch-up
// events (zxid -1) that setWatches produces go out at once, before its reply, as ZooKeeper
// sends them; during a read, a catch-up event is one of the watch the read armed, and waits for
// its reply. A request that sets no watch holds nothing back: every event handed over while it
// executes was fired before it took effect.

// eventGate is the connection's holding area for events during a request.
//
// mu guards everything and is held while frames are pushed to the writer's queue, so that an
// event handed over after a release cannot overtake the frames released before it.
type eventGate struct {
	mu sync.Mutex
	// holding is set by the executor while a request executes; passCatchUp when that request
	// is setWatches or setWatches2.
	holding, passCatchUp bool
	held                 []outFrame
	heldBytes            int64 // the size of held's frames
}

// Event queues a watch notification (EventSink), or holds it while a request executes. It
// never blocks on the client, so one slow client cannot stall the watch fan-out of every other
// connection; an event that would take the connection past what it may hold closes it instead
// (backpressure.go).
func (c *clientConn) Event(ev encoding.WatcherEvent, zxid encoding.Zxid) {
	f := outFrame{hdr: encoding.ReplyHeader{Xid: encoding.XidNotification, Zxid: zxid}, body: &ev}
	f.encode()
	g := &c.events
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.eventOverflows(f.size(), g.heldBytes) {
		if !c.isClosing() {
			c.log.Info("client does not read its watch events; closing the connection",
				zap.Int64("queuedBytes", c.budget.out.Load()+g.heldBytes))
			c.shutdown()
		}
		return
	}
	if g.holding && !(zxid < 0 && g.passCatchUp) {
		g.held = append(g.held, f)
		g.heldBytes += f.size()
		return
	}
	c.out.push(f, true)
}

// holdEvents starts holding events if the request the executor is about to run sets a watch.
func (c *clientConn) holdEvents(op encoding.Op, req encoding.Record) {
	if !setsWatch(op, req) {
		return
	}
	g := &c.events
	g.mu.Lock()
	g.holding = true
	g.passCatchUp = op == encoding.OpSetWatches || op == encoding.OpSetWatches2
	g.mu.Unlock()
}

// processedZxid is the zxid of a frame the server makes itself (a ping's answer, a
// MarshallingError): ZooKeeper's last processed zxid, which a client takes as the newest zxid
// it has seen, and asks setWatches for the changes after it when it reconnects. That is
// Session.LastZxid, whose watch events for this connection have all been handed over, except
// those of a watch that the request executing now arms (it is holding events). While such a
// request executes, the frame carries 0 instead, which the writer raises to the highest zxid
// the connection has written (raiseZxid): that watch was armed at a state no older, so none
// of its events is due at a zxid the client has been sent.
func (c *clientConn) processedZxid() encoding.Zxid {
	g := &c.events
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holding {
		return 0
	}
	return c.sess.LastZxid()
}

// setsWatch reports whether a request arms a watch: a read with its watch flag, addWatch, or
// setWatches.
func setsWatch(op encoding.Op, req encoding.Record) bool {
	switch r := req.(type) {
	case *encoding.GetDataRequest:
		return r.Watch
	case *encoding.ExistsRequest:
		return r.Watch
	case *encoding.GetChildrenRequest:
		return r.Watch
	case *encoding.GetChildren2Request:
		return r.Watch
	}
	return op == encoding.OpAddWatch || op == encoding.OpSetWatches || op == encoding.OpSetWatches2
}

// reply queues the reply of the request that holdEvents was called for, with the events held
// meanwhile (if any) around it (see above), and stops holding. As clientConn.queue, it leaves
// the frames for the caller to write.
func (c *clientConn) reply(f outFrame) {
	g := &c.events
	g.mu.Lock()
	defer g.mu.Unlock()
	upTo := f.hdr.Zxid
	for _, e := range g.held {
		if e.hdr.Zxid >= 0 && e.hdr.Zxid <= upTo {
			c.queue(e)
		}
	}
	c.queue(f)
	for _, e := range g.held {
		if e.hdr.Zxid < 0 || e.hdr.Zxid > upTo {
			c.queue(e)
		}
	}
	clear(g.held)
	g.held, g.heldBytes = g.held[:0], 0
	g.holding, g.passCatchUp = false, false
}

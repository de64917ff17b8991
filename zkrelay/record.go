package zkrelay

import (
	"bytes"
	"maps"
	"slices"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// Session is what the relay recorded of one session it relayed: a snapshot (Relay.Sessions).
type Session struct {
	ID       encoding.SessionID
	Passwd   []byte
	Timeout  time.Duration // negotiated by ZooKeeper
	ReadOnly bool          // ZooKeeper opened it read-only
	// LastZxid is the newest zxid a reply or a notification sent to the client carried. Ping
	// replies do not count, as ZooKeeper's ClientCnxn does not count them in the lastZxidSeen
	// it reconnects with.
	LastZxid encoding.Zxid
	// Watches are the watches the client holds on ZooKeeper: set by a request ZooKeeper
	// accepted or re-armed by setWatches, and not yet consumed by their one-shot event nor
	// removed.
	Watches Watches
	// Ephemerals are the ephemeral nodes this session created through the relay (create and
	// multi) and has not deleted itself, sorted. A node another session deletes stays listed:
	// the tree's ephemeralOwner is the authority on a session's ephemerals.
	Ephemerals []string
	// Server is the ZooKeeper server of its newest relayed connection.
	Server string
	// Connected: a relayed connection serves the session now. Otherwise DisconnectedAt is when
	// its last one ended (the session's timeout runs on ZooKeeper from about then).
	Connected      bool
	DisconnectedAt time.Time
	// Closed: the client closed the session (closeSession answered), at ClosedAt.
	Closed   bool
	ClosedAt time.Time
	// Expired: ZooKeeper refused to resume the session (an answer of timeout 0), at ClosedAt.
	Expired bool
}

// Watches are a session's watches by kind, each list sorted: the lists of setWatches2.
type Watches struct {
	Data                []string // getData, or exists of a node that exists
	Exist               []string // exists of a node that does not exist
	Child               []string // getChildren
	Persistent          []string // addWatch, persistent
	PersistentRecursive []string // addWatch, persistent recursive
}

// watchKind indexes record.watches.
type watchKind int

const (
	watchData watchKind = iota
	watchExist
	watchChild
	watchPersistent
	watchPersistentRecursive
	numWatchKinds
)

// record is a session's record; Relay.mu guards it.
type record struct {
	id             encoding.SessionID
	passwd         []byte
	timeout        time.Duration
	readOnly       bool
	lastZxid       encoding.Zxid
	watches        [numWatchKinds]map[string]struct{}
	ephemerals     map[string]struct{}
	server         string
	conns          int // relayed connections open
	disconnectedAt time.Time
	closed         bool
	expired        bool
	closedAt       time.Time
}

// request is a request relayed and not yet answered whose reply changes the session's record.
type request struct {
	op  encoding.Op
	req encoding.Record
}

// open registers c, relaying the session ZooKeeper answered with resp to req, and starts or
// updates the session's record. An answer of timeout 0 (an unknown or expired session, or a
// wrong password) starts none; to the session's own password it means the session expired,
// which its record then says. ZooKeeper then closes the connection.
func (r *Relay) open(c *relayConn, req *encoding.ConnectRequest, resp encoding.ConnectResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.handshaking, c.client)
	r.conns[c] = struct{}{}
	if resp.TimeOut <= 0 {
		rec := r.sessions[req.SessionID]
		if rec != nil && !rec.closed && bytes.Equal(rec.passwd, req.Passwd) {
			rec.expired, rec.closedAt = true, time.Now()
		}
		return
	}
	c.id = resp.SessionID
	rec := r.sessions[c.id]
	if rec == nil {
		rec = &record{id: c.id, ephemerals: make(map[string]struct{})}
		r.sessions[c.id] = rec
	}
	rec.passwd = bytes.Clone(resp.Passwd)
	rec.timeout = time.Duration(resp.TimeOut) * time.Millisecond
	rec.readOnly = resp.ReadOnly
	rec.server = c.addr
	rec.conns++
	rec.disconnectedAt = time.Time{}
	rec.expired, rec.closed, rec.closedAt = false, false, time.Time{}
	// ZooKeeper's watches belong to a connection: a new one starts with none, and the client
	// re-arms its own with setWatches.
	for k := range rec.watches {
		rec.watches[k] = make(map[string]struct{})
	}
	rec.lastZxid = max(rec.lastZxid, req.LastZxidSeen)
}

// end unregisters c once both of its directions have stopped.
func (r *Relay) end(c *relayConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
	if rec := r.sessions[c.id]; rec != nil {
		if rec.conns--; rec.conns == 0 {
			rec.disconnectedAt = time.Now()
		}
	}
}

// noteRequest looks at a frame the client sent. A request that changes the session's record
// when answered is kept until its reply; setWatches takes effect at once, because ZooKeeper
// sends the events it fires before its reply. A frame that does not decode is relayed all the
// same, and ZooKeeper answers it.
func (r *Relay) noteRequest(c *relayConn, frame []byte) {
	d := encoding.NewDecoder(frame)
	var hdr encoding.RequestHeader
	hdr.Decode(d)
	if d.Err() != nil || !recorded(hdr.Op) {
		return
	}
	req, _ := encoding.NewRequest(hdr.Op)
	if encoding.DecodeRecord(frame[encoding.RequestHeaderSize:], req) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.sessions[c.id]
	if rec == nil {
		return
	}
	switch req := req.(type) {
	case *encoding.SetWatches:
		rec.setWatches(req.DataWatches, req.ExistWatches, req.ChildWatches, nil, nil)
	case *encoding.SetWatches2:
		rec.setWatches(req.DataWatches, req.ExistWatches, req.ChildWatches,
			req.PersistentWatches, req.PersistentRecursiveWatches)
	default:
		c.pending[hdr.Xid] = request{op: hdr.Op, req: req}
	}
}

// recorded reports whether requests of op can change a session's record.
func recorded(op encoding.Op) bool {
	switch op {
	case encoding.OpGetData, encoding.OpExists, encoding.OpGetChildren, encoding.OpGetChildren2,
		encoding.OpAddWatch, encoding.OpRemoveWatches, encoding.OpSetWatches, encoding.OpSetWatches2,
		encoding.OpCreate, encoding.OpCreate2, encoding.OpDelete, encoding.OpMulti, encoding.OpMultiRead,
		encoding.OpCloseSession:
		return true
	}
	return false
}

// noteReply looks at a frame ZooKeeper sent: a reply, matched to its request by xid, or a
// notification.
func (r *Relay) noteReply(c *relayConn, frame []byte) {
	d := encoding.NewDecoder(frame)
	var hdr encoding.ReplyHeader
	hdr.Decode(d)
	if d.Err() != nil || hdr.Xid == encoding.XidPing {
		return
	}
	body := frame[encoding.ReplyHeaderSize:]
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.sessions[c.id]
	if rec == nil {
		return
	}
	rec.lastZxid = max(rec.lastZxid, hdr.Zxid)
	if hdr.Xid == encoding.XidNotification {
		var ev encoding.WatcherEvent
		if encoding.DecodeRecord(body, &ev) == nil {
			rec.fire(ev)
		}
		return
	}
	req, ok := c.pending[hdr.Xid]
	if !ok {
		return
	}
	delete(c.pending, hdr.Xid)
	rec.answered(req, hdr.Err, body)
}

// setWatches replaces the session's watches with the lists of a setWatches request, given in
// the order of watchKind.
func (rec *record) setWatches(lists ...[]string) {
	for k := range rec.watches {
		rec.watches[k] = make(map[string]struct{})
		for _, p := range lists[k] {
			rec.watches[k][p] = struct{}{}
		}
	}
}

// fire consumes the one-shot watches an event fires. ZooKeeper's WatchManager removes every
// standard watch of the path in the table the event triggers (data and exist watches in one,
// child watches in the other), and keeps persistent ones.
func (rec *record) fire(ev encoding.WatcherEvent) {
	switch ev.Type {
	case encoding.EventNodeCreated, encoding.EventNodeDataChanged:
		rec.unwatch(ev.Path, watchData, watchExist)
	case encoding.EventNodeDeleted:
		rec.unwatch(ev.Path, watchData, watchExist, watchChild)
	case encoding.EventNodeChildrenChanged:
		rec.unwatch(ev.Path, watchChild)
	}
}

func (rec *record) watch(path string, k watchKind) { rec.watches[k][path] = struct{}{} }

func (rec *record) unwatch(path string, kinds ...watchKind) {
	for _, k := range kinds {
		delete(rec.watches[k], path)
	}
}

// answered applies the reply to req: its error code and, if any, its body.
func (rec *record) answered(req request, code encoding.ErrCode, body []byte) {
	switch q := req.req.(type) {
	case *encoding.GetDataRequest:
		if q.Watch && code == encoding.ErrOK {
			rec.watch(q.Path, watchData)
		}
	case *encoding.ExistsRequest:
		switch {
		case !q.Watch:
		case code == encoding.ErrOK:
			rec.watch(q.Path, watchData)
		case code == encoding.ErrNoNode:
			rec.watch(q.Path, watchExist)
		}
	case *encoding.GetChildrenRequest:
		if q.Watch && code == encoding.ErrOK {
			rec.watch(q.Path, watchChild)
		}
	case *encoding.GetChildren2Request:
		if q.Watch && code == encoding.ErrOK {
			rec.watch(q.Path, watchChild)
		}
	case *encoding.AddWatchRequest:
		if code == encoding.ErrOK {
			rec.addWatch(q)
		}
	case *encoding.RemoveWatchesRequest:
		if code == encoding.ErrOK {
			rec.removeWatches(q)
		}
	case *encoding.CreateRequest:
		if code == encoding.ErrOK && q.Flags.IsEphemeral() {
			if path, ok := createdPath(req.op, body); ok {
				rec.ephemerals[path] = struct{}{}
			}
		}
	case *encoding.DeleteRequest:
		if code == encoding.ErrOK {
			delete(rec.ephemerals, q.Path)
		}
	case *encoding.MultiRequest:
		var resp encoding.MultiResponse
		if code == encoding.ErrOK && encoding.DecodeRecord(body, &resp) == nil {
			rec.multi(req.op, q, resp.Results)
		}
	case *encoding.Empty: // closeSession
		if code == encoding.ErrOK {
			rec.closed, rec.closedAt = true, time.Now()
		}
	}
}

// createdPath is the path a successful create's reply names (a sequential node's with its
// suffix).
func createdPath(op encoding.Op, body []byte) (string, bool) {
	resp, ok := encoding.NewResponse(op)
	if !ok || encoding.DecodeRecord(body, resp) != nil {
		return "", false
	}
	switch resp := resp.(type) {
	case *encoding.CreateResponse:
		return resp.Path, true
	case *encoding.Create2Response:
		return resp.Path, true
	}
	return "", false
}

func (rec *record) addWatch(q *encoding.AddWatchRequest) {
	switch q.Mode {
	case encoding.AddWatchPersistent:
		rec.watch(q.Path, watchPersistent)
	case encoding.AddWatchPersistentRecursive:
		rec.watch(q.Path, watchPersistentRecursive)
	}
}

// removeWatches removes the watches of a path that ZooKeeper's DataTree.removeWatch removes for
// the request's type; Any removes every kind.
func (rec *record) removeWatches(q *encoding.RemoveWatchesRequest) {
	switch q.Type {
	case encoding.WatcherChildren:
		rec.unwatch(q.Path, watchChild)
	case encoding.WatcherData:
		rec.unwatch(q.Path, watchData, watchExist)
	case encoding.WatcherPersistent:
		rec.unwatch(q.Path, watchPersistent)
	case encoding.WatcherPersistentRecursive:
		rec.unwatch(q.Path, watchPersistentRecursive)
	case encoding.WatcherAny:
		rec.unwatch(q.Path, watchData, watchExist, watchChild, watchPersistent, watchPersistentRecursive)
	}
}

// multi applies the results of a multi (its ephemerals) or a multiRead (its watches). A
// failed multi's results are all errors, and change nothing.
func (rec *record) multi(op encoding.Op, q *encoding.MultiRequest, results []encoding.MultiResult) {
	for i, res := range results {
		if i >= len(q.Ops) {
			return
		}
		switch sub := q.Ops[i].Record.(type) {
		case *encoding.CreateRequest:
			if !sub.Flags.IsEphemeral() {
				continue
			}
			switch created := res.Record.(type) {
			case *encoding.CreateResponse:
				rec.ephemerals[created.Path] = struct{}{}
			case *encoding.Create2Response:
				rec.ephemerals[created.Path] = struct{}{}
			}
		case *encoding.DeleteRequest:
			if res.Op == encoding.OpDelete {
				delete(rec.ephemerals, sub.Path)
			}
		case *encoding.GetDataRequest:
			if op == encoding.OpMultiRead && sub.Watch && res.Op == encoding.OpGetData {
				rec.watch(sub.Path, watchData)
			}
		case *encoding.GetChildrenRequest:
			if op == encoding.OpMultiRead && sub.Watch && res.Op == encoding.OpGetChildren {
				rec.watch(sub.Path, watchChild)
			}
		}
	}
}

// Sessions returns a snapshot of every session relayed so far, by id. Closed and expired
// sessions are kept, so that what happened to them can be told.
func (r *Relay) Sessions() []Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Session, 0, len(r.sessions))
	for _, id := range slices.Sorted(maps.Keys(r.sessions)) {
		out = append(out, r.sessions[id].snapshot())
	}
	return out
}

func (rec *record) snapshot() Session {
	return Session{
		ID:       rec.id,
		Passwd:   bytes.Clone(rec.passwd),
		Timeout:  rec.timeout,
		ReadOnly: rec.readOnly,
		LastZxid: rec.lastZxid,
		Watches: Watches{
			Data:                sortedKeys(rec.watches[watchData]),
			Exist:               sortedKeys(rec.watches[watchExist]),
			Child:               sortedKeys(rec.watches[watchChild]),
			Persistent:          sortedKeys(rec.watches[watchPersistent]),
			PersistentRecursive: sortedKeys(rec.watches[watchPersistentRecursive]),
		},
		Ephemerals:     sortedKeys(rec.ephemerals),
		Server:         rec.server,
		Connected:      rec.conns > 0,
		DisconnectedAt: rec.disconnectedAt,
		Closed:         rec.closed,
		ClosedAt:       rec.closedAt,
		Expired:        rec.expired,
	}
}

func sortedKeys(m map[string]struct{}) []string {
	return slices.Sorted(maps.Keys(m))
}

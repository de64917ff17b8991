package zetcd

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// Handler serves the requests of one session, one method per opcode, so that adding an opcode
// breaks the build until every implementation (etcd backend, decorators, test fakes) handles it.
//
// Contract for every method:
//   - It is called from the session's executor goroutine, one request at a time, in the order the
//     client sent them; an implementation needs no locking for per-session state.
//   - It returns the zxid for the reply header: for a write, the write's own zxid (also when the
//     write failed, since a failed write consumes a zxid); for a read, the newest zxid the read saw.
//   - A nil error means success and the response record is sent. The record's slices (data,
//     ACLs, children's names) may be shared with the implementation: the caller reads them and
//     never changes them.
//   - An error that is an encoding.ErrCode (errors.As) is a ZooKeeper error: the reply is the header
//     with that code and no body; the zxid is still used.
//   - Any other error means the request could not be served at all (etcd unreachable, context
//     cancelled): the server closes the connection without a reply, and the session survives for
//     the client to resume.
//
// Requests arrive decoded but unvalidated: paths, flags and ACLs are checked by the implementation,
// in ZooKeeper's order (PrepRequestProcessor).
type Handler interface {
	Create(ctx context.Context, req *encoding.CreateRequest) (*encoding.CreateResponse, encoding.Zxid, error)
	Create2(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error)
	Delete(ctx context.Context, req *encoding.DeleteRequest) (encoding.Zxid, error)
	Exists(ctx context.Context, req *encoding.ExistsRequest) (*encoding.ExistsResponse, encoding.Zxid, error)
	GetData(ctx context.Context, req *encoding.GetDataRequest) (*encoding.GetDataResponse, encoding.Zxid, error)
	SetData(ctx context.Context, req *encoding.SetDataRequest) (*encoding.SetDataResponse, encoding.Zxid, error)
	GetACL(ctx context.Context, req *encoding.GetACLRequest) (*encoding.GetACLResponse, encoding.Zxid, error)
	SetACL(ctx context.Context, req *encoding.SetACLRequest) (*encoding.SetACLResponse, encoding.Zxid, error)
	GetChildren(ctx context.Context, req *encoding.GetChildrenRequest) (*encoding.GetChildrenResponse, encoding.Zxid, error)
	GetChildren2(ctx context.Context, req *encoding.GetChildren2Request) (*encoding.GetChildren2Response, encoding.Zxid, error)
	Sync(ctx context.Context, req *encoding.SyncRequest) (*encoding.SyncResponse, encoding.Zxid, error)

	// Watches (WatchManager). Reads with Watch set register on this connection; every event
	// goes to the connection's EventSink. Events produced by a method itself (setWatches
	// catch-up) are handed to the sink before it returns; for the others, see
	// Session.AwaitEvents.
	SetWatches(ctx context.Context, req *encoding.SetWatches) (encoding.Zxid, error)
	SetWatches2(ctx context.Context, req *encoding.SetWatches2) (encoding.Zxid, error)
	// AddWatch's success reply body is ErrorResponse{0}; the server writes it.
	AddWatch(ctx context.Context, req *encoding.AddWatchRequest) (encoding.Zxid, error)
	CheckWatches(ctx context.Context, req *encoding.CheckWatchesRequest) (encoding.Zxid, error)
	RemoveWatches(ctx context.Context, req *encoding.RemoveWatchesRequest) (encoding.Zxid, error)

	// Transactions and the 3.5–3.9 operations (ZooDefs.OpCode).
	Multi(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error)
	MultiRead(ctx context.Context, req *encoding.MultiRequest) (*encoding.MultiResponse, encoding.Zxid, error)
	CreateContainer(ctx context.Context, req *encoding.CreateRequest) (*encoding.Create2Response, encoding.Zxid, error)
	CreateTTL(ctx context.Context, req *encoding.CreateTTLRequest) (*encoding.Create2Response, encoding.Zxid, error)
	DeleteContainer(ctx context.Context, req *encoding.DeleteContainerRequest) (encoding.Zxid, error)
	GetEphemerals(ctx context.Context, req *encoding.GetEphemeralsRequest) (*encoding.GetEphemeralsResponse, encoding.Zxid, error)
	GetAllChildrenNumber(ctx context.Context, req *encoding.GetAllChildrenNumberRequest) (*encoding.GetAllChildrenNumberResponse, encoding.Zxid, error)
	WhoAmI(ctx context.Context, req *encoding.Empty) (*encoding.WhoAmIResponse, encoding.Zxid, error)
	Reconfig(ctx context.Context, req *encoding.ReconfigRequest) (*encoding.GetDataResponse, encoding.Zxid, error)
	Sasl(ctx context.Context, req *encoding.GetSASLRequest) (*encoding.SetSASLResponse, encoding.Zxid, error)

	// Auth adds an identity to the connection (ZooKeeperServer.processPacket). ErrAuthFailed is answered and
	// then the connection is closed, as ZooKeeper does.
	Auth(ctx context.Context, req *encoding.AuthPacket) (encoding.Zxid, error)
}

// EventSink receives the watch notifications of one connection. Event must not block for long:
// it queues the notification behind whatever the connection has already queued. zxid is the
// zxid of the change that fired the event, or -1 for events produced by setWatches.
type EventSink interface {
	Event(ev encoding.WatcherEvent, zxid encoding.Zxid)
}

// Session is one ZooKeeper session as a Backend keeps it: the handler for its requests plus its
// life cycle. The Server owns the Session it got from Backend.Connect and calls the life-cycle
// methods below only while no Handler method of that Session is running.
//
// A Session value stands for one connection's hold on the session. When a client resumes the
// session, Connect returns a new value for the same ID; Detach and Expire on the old value may
// then run concurrently with the new value's Handler calls, and must affect only the old value
// (Expire is a no-op for a session resumed since).
type Session interface {
	Handler

	ID() encoding.SessionID
	// Password is the 16-byte secret a client presents to resume the session.
	Password() []byte
	// Timeout is the negotiated session timeout.
	Timeout() time.Duration

	// AwaitEvents returns once every watch event of this connection fired by a change at a zxid
	// <= zxid has been handed to the EventSink. The server calls it after each Handler call and
	// before queuing the reply, so a client sees an event before any reply that reflects the
	// change that fired it (docs/design.md, "Watches"). An error (context ended) is logged; the reply is
	// still sent.
	AwaitEvents(ctx context.Context, zxid encoding.Zxid) error
	// LastZxid is ZooKeeper's last processed zxid as this server sees it, without a round trip
	// and without blocking: a zxid the backend knows to be applied, such that
	//   - every watch event of this connection fired by a change at a zxid <= it has been
	//     handed to the EventSink, but those of a watch that a Handler call still running
	//     arms (the server does not use LastZxid during such a call: events.go), and
	//   - every read that starts after LastZxid returns reflects it.
	// Ping replies and the errors the server makes itself carry it, and every later reply at
	// least it (the writer never lets zxids go back), and a client takes it as seen: one that
	// reconnects asks setWatches only for the changes after it, so an event at or below it
	// still to come would be lost. ZooKeeper's own last processed zxid keeps both promises:
	// its watches fire as each change is applied. Safe to call concurrently with every other
	// method.
	LastZxid() encoding.Zxid
	// ReadyToRead reports whether a read (exists, getData, getChildren, getChildren2, getACL,
	// getAllChildrenNumber, getEphemerals, multiRead) would be answered at once, from memory,
	// without waiting for the network or for the backend to catch up. The server then runs it
	// in the goroutine that read it from the client, which must not block (it also answers the
	// client's pings). A backend, or a decorator, that cannot promise that returns false. Called
	// in order with the Handler methods, never concurrently with them.
	ReadyToRead() bool
	// RefuseWrite consumes a zxid for a request the server refused before any Handler method
	// saw it but that ZooKeeper logs as an error transaction (a multi whose body does not
	// decode, createSession inside a session), and returns that zxid. It is called from the
	// executor, in order with the Handler methods, and its error means what theirs does.
	RefuseWrite(ctx context.Context, op encoding.Op) (encoding.Zxid, error)
	// AddAuthIDs adds identities the server established itself after the handshake to this
	// connection's hold on the session: sasl:<principal> (and super: for the SASL super user)
	// when a SASL exchange completes. From the next request on, ACL checks, whoAmI and the
	// "auth" ACL scheme see them, as they see ConnectParams.AuthIDs and what Auth adds. Called
	// from the executor, in order with the Handler methods.
	AddAuthIDs(ids []encoding.ID)

	// Close ends the session at the client's request (closeSession): its ephemeral nodes are
	// deleted in one transaction, after every write the session sent before has landed (one
	// abandoned by its context too; ctx bounds the wait). Returns the zxid of that transaction.
	Close(ctx context.Context) (encoding.Zxid, error)
	// Expire ends the session because its client was silent past the timeout, exactly as Close
	// does, except that it does nothing when the session has been resumed by another connection
	// (on this or another zetcd process) since this Session was returned by Connect.
	Expire(ctx context.Context) error
	// Done is closed when this connection can no longer serve the session: it ended or moved
	// (it expired in the store, or another connection on this or another zetcd process resumed
	// it), or the backend can no longer vouch that it lives (Err). The server then closes this
	// connection and Detaches the Session, as ZooKeeper closes a connection whose session is
	// gone, and a follower that lost its leader closes its clients'. A backend that cannot
	// tell returns nil (never closed).
	Done() <-chan struct{}
	// Err says, once Done is closed, why: an error wrapping ErrNotServing when the session may
	// live on but the backend cannot confirm it from here (cut off from its store), so the
	// client should resume it, here later or on another server, before its timeout; nil when
	// the session ended or moved.
	Err() error
	// AfterDone arranges for f to be called, in a goroutine of its own, once Done is closed, as
	// context.AfterFunc does for a context: stop cancels that, and reports whether it did (false:
	// f has been started, or stop was called before). The server learns of the session's end
	// this way, so that an idle connection is one goroutine (its reader), not one more waiting
	// on Done. A backend that has only the channel can use AfterClose.
	AfterDone(f func()) (stop func() bool)
	// Detach tells the backend the client's connection is gone without ending the session: the
	// backend stops keeping it alive, and the client may resume it (here or on another zetcd)
	// until it expires. Detach is idempotent and does not block on the network.
	Detach()
}

// AfterClose calls f, in a goroutine of its own, once done is closed, unless stop is called
// first; stop reports whether it prevented f. It is Session.AfterDone for a backend that has
// only a Done channel, at the cost of a goroutine waiting on it (none if done is nil).
func AfterClose(done <-chan struct{}, f func()) (stop func() bool) {
	if done == nil {
		return func() bool { return false }
	}
	var state atomic.Int32 // 0: waiting, 1: f started, 2: stopped
	stopped := make(chan struct{})
	go func() {
		select {
		case <-done:
			if state.CompareAndSwap(0, 1) {
				f()
			}
		case <-stopped:
		}
	}()
	return func() bool {
		if state.CompareAndSwap(0, 2) {
			close(stopped)
			return true
		}
		return false
	}
}

// ConnectParams is a client's ConnectRequest after timeout negotiation.
type ConnectParams struct {
	// SessionID is 0 for a new session, else the session to resume with Passwd.
	SessionID encoding.SessionID
	Passwd    []byte
	// Timeout is already clamped to the server's [min, max] session timeout.
	Timeout time.Duration
	// LastZxidSeen is the newest zxid the client has seen.
	LastZxidSeen encoding.Zxid
	// Events receives this connection's watch notifications; never nil.
	Events EventSink
	// RemoteAddr is the client's address (the "ip" ACL scheme identity).
	RemoteAddr net.Addr
	// AuthIDs are identities the transport established, which the connection holds from the
	// start: x509:<subject DN> for a verified TLS client certificate.
	AuthIDs []encoding.ID
}

// Backend opens and resumes sessions. It is safe for concurrent use.
type Backend interface {
	// Connect opens a new session or resumes an existing one. Errors:
	//   - ErrSessionExpired: unknown or expired session, or wrong password; the server answers
	//     with a ConnectResponse of timeout 0 and closes the connection.
	//   - ErrZxidAhead: the client has seen a newer zxid than this backend has; the server closes
	//     the connection without a reply so the client tries another server.
	//   - anything else: the backend failed; the server closes the connection.
	Connect(ctx context.Context, p ConnectParams) (Session, error)
}

// ReadOnlyBackend is a Backend that can go on serving reads from what it holds while its store
// is out of reach: ZooKeeper's read-only mode (readonlymode.enabled, ReadOnlyZooKeeperServer),
// which a Server uses with Config.ReadOnlyMode. A Server finds it as it finds a StatsSource,
// beneath the Backend's decorators.
type ReadOnlyBackend interface {
	// CutOff reports whether the backend cannot reach a quorum of its store now; read-only
	// sessions are served only then. Cheap: no round trip.
	CutOff() bool
	// ConnectReadOnly opens (p.SessionID 0) or resumes a read-only session local to this
	// process, served from the backend's state as of the newest revision it received. The
	// Session's Done is closed once the store is in reach again, with Err nil: the server then
	// closes its connection, as ReadOnlyZooKeeperServer's shutdown closes every connection,
	// and the client reconnects read-write. Its Handler is only called with reads: the server
	// answers every other request itself (NotReadOnly). Errors:
	//   - ErrSessionExpired: a local read-only session that ended, or a wrong password;
	//   - ErrZxidAhead: p.LastZxidSeen is ahead of the backend's state;
	//   - ErrNotServing (wrapped): p.SessionID is not a read-only session of this process (a
	//     global session, which ReadOnlyZooKeeperServer.validateSession refuses); the server
	//     closes the connection without an answer.
	ConnectReadOnly(ctx context.Context, p ConnectParams) (Session, error)
	// ReadOnlyStats are StatsSource.Stats' numbers as of the state read-only sessions are
	// served from, at once: what the four-letter words report while the server is read-only,
	// as a ReadOnlyZooKeeperServer reports its tree.
	ReadOnlyStats() BackendStats
}

var (
	// ErrSessionExpired is returned by Backend.Connect for a session that cannot be resumed.
	ErrSessionExpired = errors.New("zetcd: session expired or unknown")
	// ErrZxidAhead is returned by Backend.Connect when the client's lastZxidSeen is ahead of
	// the backend's newest zxid.
	ErrZxidAhead = errors.New("zetcd: client has seen a newer zxid than the server")
	// ErrNotServing is returned (wrapped) by a Session's request when the backend cannot serve
	// it now: its state has not reached what the request must see (etcd unreachable, its feed
	// stalled), and by Session.Err when the backend cannot vouch that the session lives. The
	// server closes the connection without a reply, and the session survives for the client
	// to resume, here or on another server, as a ZooKeeper server that is not running (a
	// follower without a leader) closes its clients' connections.
	ErrNotServing = errors.New("zetcd: not serving: etcd is out of reach or the server's state is behind it")
)

// StatsSource is implemented by a Backend that can report what ZooKeeper's four-letter words and
// zetcd's metrics show about the tree, the sessions and the watches. A Server asks for it with
// statsSourceOf; without one, those numbers read as zero.
type StatsSource interface {
	// Stats reports the numbers that cost one bounded backend request (count-only ranges, no
	// data transferred).
	Stats(ctx context.Context) (BackendStats, error)
	// TreeStats reads the whole tree once (every session's ephemeral nodes). It is for the
	// commands that need it (dump), never for a hot path.
	TreeStats(ctx context.Context) (TreeStats, error)
	// Watches lists every watch registered in this process, from memory.
	Watches() []WatchInfo
}

// BackendStats are a backend's cheap numbers.
type BackendStats struct {
	// Zxid is the newest zxid of the backend (etcd's revision).
	Zxid encoding.Zxid
	// NodeCount counts the znodes as ZooKeeper's DataTree does: one more than there are, since
	// it holds the root under both "" and "/".
	NodeCount int64
	// Sessions counts the sessions in the backend, whichever zetcd process serves them
	// (ZooKeeper's global sessions).
	Sessions int64
	// EphemeralCount and ApproximateDataSize are TreeStats', kept as counts by the backend.
	EphemeralCount      int64
	ApproximateDataSize int64
}

// TreeStats are the numbers read from the whole tree at one zxid.
type TreeStats struct {
	Zxid      encoding.Zxid
	NodeCount int64 // as BackendStats.NodeCount
	// Ephemerals lists the ephemeral nodes of every session that has any, paths sorted.
	Ephemerals map[encoding.SessionID][]string
	// EphemeralCount is the number of paths in Ephemerals.
	EphemeralCount int64
	// ApproximateDataSize is ZooKeeper's approximate data size: the length of every node's
	// path plus the length of its data.
	ApproximateDataSize int64
}

// WatchKind names the kind of a watch, as zetcd's metrics label it.
type WatchKind string

const (
	WatchData                WatchKind = "data"                // getData, or exists on a present node
	WatchExist               WatchKind = "exist"               // exists on an absent node
	WatchChild               WatchKind = "child"               // getChildren, getChildren2
	WatchPersistent          WatchKind = "persistent"          // addWatch mode 0
	WatchPersistentRecursive WatchKind = "persistentRecursive" // addWatch mode 1
)

// WatchKinds lists every WatchKind.
var WatchKinds = []WatchKind{WatchData, WatchExist, WatchChild, WatchPersistent, WatchPersistentRecursive}

// WatchInfo is one registered watch.
type WatchInfo struct {
	Session encoding.SessionID
	Path    string
	Kind    WatchKind
}

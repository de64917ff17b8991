package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The leases of this process's sessions are kept alive by one leaseKeeper: one gRPC keepalive
// stream and three goroutines for the whole process, where the etcd client's Lease.KeepAlive
// costs two goroutines and a channel per lease (a third of a session's memory).
//
// The keeper also says how long this process may go on serving a session without etcd's word
// that its lease lives (servingWindow). A zetcd cut off from etcd (a partition, the only member
// it knows frozen) can no longer refresh the lease; once its process key lapses, the elected
// zetcd adopts the session as an orphan and ends it when the lease shows no refresh for the
// session's timeout plus the keepalive cadence (orphanEndTTL). If this process went on
// answering the client meanwhile, the client would believe it still holds its ephemeral nodes
// after they were deleted and taken by others. So, as a ZooKeeper follower that loses its
// leader closes its clients' connections, the keeper reports a lease whose refresh etcd has
// not confirmed within the window (lapsed), and the session's connection is closed: at least
// the timeout before anyone can end the session, so the client, told it is disconnected, can
// resume it on a zetcd that reaches etcd. The formulas of these timings are timing.go.

const (
	// keepAliveTick is how often the keeper looks for leases due for a refresh, and for lapsed
	// ones.
	keepAliveTick = 500 * time.Millisecond
	// keepAliveStall is how long a refresh may go unanswered before the stream is opened again:
	// a stream on a member that stopped answering (frozen, cut off) holds every refresh, and a
	// new stream may be balanced onto another member.
	keepAliveStall = 1500 * time.Millisecond
)

// leaseKeeper refreshes registered leases until they are removed or etcd reports them gone, and
// reports the leases that lapsed.
type leaseKeeper struct {
	client pb.LeaseClient
	log    *zap.Logger

	mu     sync.Mutex
	leases map[clientv3.LeaseID]*keptLease // guarded by mu
	// stallWarned is set when a stall is logged as a warning, and cleared by the next answer:
	// while etcd stays out of reach, the reopened streams stall again and are logged at debug.
	stallWarned bool // guarded by mu
	// cancelStream ends the current stream (nil between streams); watch calls it on a stall.
	cancelStream context.CancelCauseFunc // guarded by mu
}

// keptLease is one lease the keeper refreshes.
type keptLease struct {
	next time.Time // when it is due
	// refs counts the sessions that asked for it: a session resumed on a new connection of this
	// process has two until the old one is detached.
	refs    int
	timeout time.Duration // the session's
	window  time.Duration // servingWindow of the lease's TTL as etcd last reported it
	// confirmed is when the last refresh etcd answered was sent (or, before any, when the
	// session was taken); sent is when the refresh in flight on the current stream was sent,
	// zero if none is.
	confirmed, sent time.Time
	lapsed          bool // reported by inspect, and not again until a refresh is answered
}

func newLeaseKeeper(client pb.LeaseClient, log *zap.Logger) *leaseKeeper {
	return &leaseKeeper{client: client, log: log, leases: map[clientv3.LeaseID]*keptLease{}}
}

// add starts refreshing id now, for one more holder: a session with timeout timeout, whose
// lease of granted seconds was known alive at confirmed (its grant, or its session key read).
func (k *leaseKeeper) add(id clientv3.LeaseID, timeout time.Duration, granted int64, confirmed time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.leases[id]
	switch {
	case l == nil:
		l = &keptLease{timeout: timeout, window: servingWindow(granted, timeout), confirmed: confirmed}
		k.leases[id] = l
	case confirmed.After(l.confirmed):
		// Taken again while an old holder lets go: vouched for anew, and refreshed at once.
		l.confirmed, l.lapsed, l.next = confirmed, false, time.Time{}
	}
	l.refs++
}

// remove drops one holder of id; the lease is no longer refreshed once it has none.
func (k *leaseKeeper) remove(id clientv3.LeaseID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.leases[id]; l != nil {
		if l.refs--; l.refs <= 0 {
			delete(k.leases, id)
		}
	}
}

// due returns the leases due for a refresh at now, and marks them not due again before their
// answer comes. A stream delivers in order or fails, so a refresh is not sent twice on one
// stream; the next stream sends again what is unanswered (startStream).
func (k *leaseKeeper) due(now time.Time) []clientv3.LeaseID {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []clientv3.LeaseID
	for id, l := range k.leases {
		if l.sent.IsZero() && !l.next.After(now) {
			ids = append(ids, id)
			l.sent = now
		}
	}
	return ids
}

// startStream records cancel as the current stream's, and makes the refreshes left unanswered
// by the last stream due at once, on the new one.
func (k *leaseKeeper) startStream(cancel context.CancelCauseFunc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancelStream = cancel
	for _, l := range k.leases {
		if !l.sent.IsZero() {
			l.next, l.sent = time.Time{}, time.Time{}
		}
	}
}

// answered records etcd's answer for a lease: refreshed for ttl seconds, or gone (ttl <= 0:
// nothing to refresh any more). The next refresh is due a third of a serving window later, so
// that a stalled stream is noticed and opened again (keepAliveStall) well before the window
// ends.
func (k *leaseKeeper) answered(id clientv3.LeaseID, ttl int64, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stallWarned = false
	l := k.leases[id]
	if l == nil {
		return
	}
	if ttl <= 0 {
		delete(k.leases, id)
		return
	}
	if !l.sent.IsZero() {
		l.confirmed, l.sent = l.sent, time.Time{}
	}
	l.window, l.lapsed = servingWindow(ttl, l.timeout), false
	l.next = now.Add(refreshDelay(l.window))
}

// lapsedLease is a lease inspect reports, and how long ago etcd last confirmed it.
type lapsedLease struct {
	id    clientv3.LeaseID
	since time.Duration
}

// inspect looks at every lease once at now. It returns those whose serving window has passed
// without a confirmed refresh, each once until etcd answers a refresh of it again, and whether
// a refresh sent on the current stream before now-keepAliveStall is still unanswered.
func (k *leaseKeeper) inspect(now time.Time) (lapsed []lapsedLease, stalled bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, l := range k.leases {
		stalled = stalled || (!l.sent.IsZero() && now.Sub(l.sent) > keepAliveStall)
		if since := now.Sub(l.confirmed); !l.lapsed && since > l.window {
			l.lapsed = true
			lapsed = append(lapsed, lapsedLease{id, since})
		}
	}
	return lapsed, stalled
}

// watch inspects the leases every tick until ctx ends: it calls lapsed with each lapsed lease,
// and ends a stalled stream (run opens another). It runs apart from the stream, whose Send
// blocks once a member that stopped reading has filled the stream's window.
func (k *leaseKeeper) watch(ctx context.Context, lapsed func(id clientv3.LeaseID, since time.Duration)) {
	t := time.NewTicker(keepAliveTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			lapses, stalled := k.inspect(now)
			if stalled {
				k.mu.Lock()
				if k.cancelStream != nil {
					k.cancelStream(errKeepAliveStalled)
				}
				k.mu.Unlock()
			}
			for _, l := range lapses {
				lapsed(l.id, l.since)
			}
		}
	}
}

// run keeps a keepalive stream open until ctx ends, reopening it after an error (a member that
// lost its leader, or went away: WithRequireLeader makes the balancer try another) or a stall.
func (k *leaseKeeper) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := k.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errKeepAliveStalled) && k.warnStall() {
			k.log.Warn("session keepalive stream stalled; reopening it", zap.Error(err))
		} else {
			k.log.Debug("session keepalive stream ended; reopening", zap.Error(err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(keepAliveTick):
		}
	}
}

// warnStall reports whether a stall should be logged as a warning: the first since an answer.
func (k *leaseKeeper) warnStall() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	warn := !k.stallWarned
	k.stallWarned = true
	return warn
}

var errKeepAliveStalled = fmt.Errorf("a lease refresh went unanswered for %v", keepAliveStall)

// stream sends the due refreshes over one stream and reads its answers, until either fails or
// watch ends it for a refresh unanswered for keepAliveStall.
func (k *leaseKeeper) stream(ctx context.Context) error {
	sctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(ctx))
	defer cancel(nil)
	s, err := k.client.LeaseKeepAlive(sctx)
	if err != nil {
		return err
	}
	k.startStream(cancel)
	defer k.startStream(nil)
	recvDone := make(chan error, 1)
	go func() {
		for {
			resp, err := s.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			k.answered(clientv3.LeaseID(resp.ID), resp.TTL, time.Now())
		}
	}()
	t := time.NewTicker(keepAliveTick)
	defer t.Stop()
	for {
		for _, id := range k.due(time.Now()) {
			if err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
				cancel(err)
				<-recvDone
				return context.Cause(sctx)
			}
		}
		select {
		case err := <-recvDone:
			if sctx.Err() != nil {
				return context.Cause(sctx) // a stall, say, that ended Recv first
			}
			return err
		case <-t.C:
		case <-sctx.Done():
			<-recvDone
			return context.Cause(sctx)
		}
	}
}

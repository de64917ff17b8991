package etcdstore

import (
	"math"
	"time"
)

// Every session timing derived from the session timeout, in one place. A session is an etcd
// lease (connect.go) that this process refreshes (keepalive.go) while it serves the session;
// when the process dies, the elected leader ends the session as an orphan (orphans.go); when
// every zetcd is gone, etcd expires the lease. The rules:
//
//   - no one ends a session before its timeout has passed since its client was last heard;
//   - this process stops serving a session it can no longer vouch for (its lease unconfirmed)
//     at least a timeout before anyone else could end it, so the client resumes it elsewhere;
//   - the leader ends an orphan before etcd expires its lease, so that its ephemerals go in one
//     zxid with their parents' pzxid moved, as ZooKeeper's SessionTrackerImpl expiry does.
//
// With t the session timeout and m Config.LeaseMargin (default 60 s):
//
//	name                  formula                                     t = 10 s   t = 40 s
//	keepAliveCadence      t/2 + 4 s                                   9 s        24 s
//	servingWindow         keepAliveCadence - lapseMargin = t/2 + 3 s  8 s        23 s
//	refreshDelay          servingWindow / 3 = t/6 + 1 s               2.67 s     7.67 s
//	leaseTTL              ⌈t + keepAliveCadence + 3 s + m⌉            82 s       127 s
//	                      = 1.5×t + 7 s + m
//	orphanEndTTL          ⌊leaseTTL - 1 s - keepAliveCadence - t⌋     62 s       62 s
//	                      = m + 2 s (remaining TTL at the end)
//	orphanEnd             t + keepAliveCadence = 1.5×t + 4 s          19 s       64 s
//	                      (no refresh for this long, plus up to 1 s
//	                      for etcd's whole-second TTL: orphan ended)
//	processTTL            3 s, whatever t: how soon the leader        3 s        3 s
//	                      learns that a process died
//
// The examples are for the default margin; leaseTTL and orphanEndTTL are the ones that move with it.

const (
	// lapseMargin is taken off the serving window for the tick that notices a lapse and the
	// closing of the connection.
	lapseMargin = time.Second
	// processTTL is the lease TTL (seconds) of a process key: how soon after a zetcd dies the
	// leader learns its sessions are orphaned (leaseTTL counts on it).
	processTTL = 3
)

// keepAliveCadence bounds the age of a live lease's last refresh, for a session of timeout
// timeout, that orphanEndTTL and leaseTTL count on. It depends on the timeout alone, not on the
// lease's TTL, so that a long TTL (leaseTTL's margin) does not make the elected zetcd end an
// orphan later: the keeper refreshes every third of the serving window (refreshDelay), well
// within it, and the rest covers a stream opened again after a stall and the round trip.
func keepAliveCadence(timeout time.Duration) time.Duration {
	return timeout/2 + 4*time.Second
}

// orphanEnd is how long an orphan's lease has gone without a refresh when the leader ends it
// (orphanEndTTL; up to a second more, as etcd reports whole seconds): never sooner than the
// session's timeout after its process last heard its client, which its last refresh follows by
// at most keepAliveCadence.
func orphanEnd(timeout time.Duration) time.Duration {
	return timeout + keepAliveCadence(timeout)
}

// servingWindow is how long after sending a refresh that etcd answered this process may serve
// the session of a lease granted TTL granted seconds, with timeout timeout: the earliest anyone
// can end the session after that refresh (the elected zetcd's end of an orphan, else etcd's
// expiry), less the session's timeout, less lapseMargin. The session then never ends sooner
// than its timeout after this process last served its client.
func servingWindow(granted int64, timeout time.Duration) time.Duration {
	end := time.Duration(granted) * time.Second
	if orphanEndTTL(granted, timeout) > 0 {
		end = orphanEnd(timeout)
	}
	return max(end-timeout-lapseMargin, 2*keepAliveTick)
}

// refreshDelay is how long after etcd answered a refresh the keeper sends the next one: a third
// of the serving window, so that a stalled stream is noticed and opened again (keepAliveStall)
// well before the window ends.
func refreshDelay(window time.Duration) time.Duration { return window / 3 }

// defaultLeaseMargin is Config.LeaseMargin's default; see leaseTTL.
const defaultLeaseMargin = 60 * time.Second

// leaseTTL is the etcd lease TTL, in whole seconds, for a session timeout: timeout + the
// keepalive cadence + 3 s + the margin, that is 1.5×timeout + 7 s + the margin.
//
// Neither etcd's own expiry of a lease nor the leader's end of an orphan (orphanEndTTL) may
// come before the client's timeout has passed since its process last heard it. A process that
// stopped at t refreshed its leases last after t - keepAliveCadence; the leader ends an orphan
// once its lease shows no refresh for timeout + cadence + 1 s, which 2 s more keep ahead of
// etcd's expiry, so that the session ends with exact parent stats.
//
// The margin is for etcd: a leader that stalls for longer than a lease's TTL revokes the lease
// as it resumes, though the others elected a new leader meanwhile and the lease was refreshed
// there (its lessor acts before it learns so). With a margin of a minute, a session outlives a
// stall of a minute and more. The price: once every zetcd has died, etcd removes a session's
// ephemerals up to the margin later; no client sees it, as no zetcd serves meanwhile, and the
// next one elected ends the orphans at their time.
func (b *Store) leaseTTL(timeout time.Duration) int64 { return leaseTTLWith(timeout, b.leaseMargin) }

// leaseTTLWith is leaseTTL for a lease margin m (Config.LeaseMargin).
func leaseTTLWith(timeout, m time.Duration) int64 {
	ttl := timeout + keepAliveCadence(timeout) + 3*time.Second + m
	return int64((ttl + time.Second - 1) / time.Second)
}

// orphanEndTTL is the remaining TTL (whole seconds, truncated, as etcd reports it) at or below
// which the leader ends an orphan whose lease was granted granted seconds: by then the last
// keepalive is more than granted-ttl-1 seconds old, at least orphanEnd, however long the
// lease. leaseTTL makes it 2 plus its margin; 0 leaves the session to etcd's own expiry.
func orphanEndTTL(granted int64, timeout time.Duration) int64 {
	return max(int64(math.Floor(float64(granted)-1-orphanEnd(timeout).Seconds())), 0)
}

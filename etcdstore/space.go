package etcdstore

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Space: zetcd's data stays below etcd's space quota. Past its quota etcd raises its NOSPACE
// alarm and refuses every write, deletes and new sessions included, until an operator
// compacts, defragments and disarms it. So the store refuses, with ZooKeeper's QuotaExceeded,
// writes that would grow etcd's database in use past a limit below the quota (Config.DataLimit,
// by default three quarters of it), and keeps serving reads, deletes, writes that do not grow
// the data, and sessions.
//
// How the store knows the size without a request per write: a background poll (every
// Config.SpacePoll) reads each endpoint's status (database size, size in use, quota, the
// cluster's alarms); every byte the store has sent in a put since the poll before counts as in
// use on top (it is, as history, until etcd compacts it). A write is checked on the multi
// engine's overlay (commit.go, multi.go), which holds the nodes it changes and so knows its
// exact growth (multiState.grow): creates grow the data, setData grows it by the difference of
// the sizes, deletes shrink it. A multi is refused when the sum of its ops' growth does not
// fit, at the first op that grows it past the limit; so is a write whose growth does not fit
// after the earlier writes of its batch.
//
// A second, harder bound keeps etcd's file itself below its quota when history and
// fragmentation outgrow what the compactor frees: once the file is within an eighth of the
// quota, writes that put data without shrinking any (setData of the same size too) are refused
// as well, until compaction and defragmentation make room. Deletes never are.
//
// History counts: a setData that keeps a node's size still writes a new version, which stays in
// use until etcd compacts it (the embedded etcd's compactor does that quickly under pressure,
// internal/embedetcd; an external etcd's own compaction policy decides). Deleted data frees
// space only once compacted, too.

// Space is what the store knows of etcd's space, as of its last poll.
type Space struct {
	// DBSize and DBSizeInUse are etcd's database file size (what its quota counts) and the
	// part of it in use; the largest over the members polled.
	DBSize, DBSizeInUse int64
	// Quota is etcd's space quota (etcd 3.6+ reports it; else Config.Quota); 0: none.
	Quota int64
	// Limit is zetcd's data limit (Config.DataLimit): 0 means none.
	Limit int64
	// NoSpace says etcd's NOSPACE alarm is raised: etcd refuses every write.
	NoSpace bool
	// Polled is when the status was read; zero before the first poll succeeded.
	Polled time.Time
}

// defaultSpacePoll is Config.SpacePoll's default.
const defaultSpacePoll = time.Second

// defaultQuota is etcd's default space quota (2 GiB), Config.Quota's default.
const defaultQuota = 2 << 30

// Estimates of what a write adds to etcd's database beyond its data, per node: the data, ACL
// and meta keys (each naming the path), their values' headers, and etcd's per-key index.
const (
	nodeOverhead  = 512
	writeOverhead = 128
)

// createBytes is what creating a node at path with data adds to etcd's database, roughly.
func createBytes(path string, data []byte) int64 {
	return int64(len(data)) + 3*int64(len(path)) + nodeOverhead
}

// spaceMonitor polls etcd's space and decides which writes fit. Its goroutine (run) writes
// polled; everything else is atomic.
type spaceMonitor struct {
	cli      *clientv3.Client
	log      *zap.Logger
	interval time.Duration // <= 0: never polls (room is unlimited)
	limit    int64         // Config.DataLimit: > 0 fixed, 0 a share of the quota, < 0 none
	quota    int64         // Config.Quota: etcd's quota when etcd does not report it
	managed  bool          // Config.ManagedEtcd

	polled atomic.Pointer[Space]
	// written counts the bytes put since the poll before the one in polled: etcd commits
	// its writes to its database in batches (every 100 ms), so a status can miss the writes of
	// the moments before it.
	written atomic.Int64
	// lastPoll is what written was at the start of the last poll (polling goroutine only).
	lastPoll int64
	// noSpace is set when etcd refused a write for NOSPACE since the last poll.
	noSpace atomic.Bool
	// refused is set when a write was refused for the limit since the last poll.
	refused atomic.Bool

	// Only the polling goroutine uses these: the alarm and the limit episodes being logged.
	alarmLogged, limitLogged bool
	done                     chan struct{} // closed when run returns; nil if it never ran
}

// room is what writes may still add: grow is how much they may grow the data before the
// limit, put how many bytes they may put before etcd's file reaches its hard limit (a quota's
// eighth below the quota: history and fragmentation make the file larger than the data in
// use, until the compactor catches up). Both are MaxInt64 with no limit (or before the first
// poll), and 0 when etcd's NOSPACE alarm is raised.
type room struct{ grow, put int64 }

func (m *spaceMonitor) room() room {
	sp := m.polled.Load()
	if m.noSpace.Load() || (sp != nil && sp.NoSpace) {
		return room{}
	}
	r := room{grow: math.MaxInt64, put: math.MaxInt64}
	if sp == nil {
		return r
	}
	w := m.written.Load()
	if sp.Limit > 0 {
		r.grow = sp.Limit - sp.DBSizeInUse - w
	}
	if sp.Quota > 0 {
		r.put = sp.Quota - sp.Quota/8 - sp.DBSize - w
	}
	return r
}

// fits reports whether a write that grows the data by at most n bytes, and puts about as many,
// fits.
func (m *spaceMonitor) fits(n int64) bool {
	r := m.room()
	return n <= r.grow && n <= r.put
}

// wrote counts n bytes put.
func (m *spaceMonitor) wrote(n int64) { m.written.Add(n) }

// refusing records that a write was refused for the limit.
func (m *spaceMonitor) refusing() { m.refused.Store(true) }

// sawNoSpace records that etcd refused a write with NOSPACE (its alarm is raised).
func (m *spaceMonitor) sawNoSpace() { m.noSpace.Store(true) }

// space returns the last poll's Space, with a NOSPACE refusal seen since.
func (m *spaceMonitor) space() Space {
	var sp Space
	if p := m.polled.Load(); p != nil {
		sp = *p
	}
	sp.NoSpace = sp.NoSpace || m.noSpace.Load()
	return sp
}

// run polls every interval until ctx ends.
func (m *spaceMonitor) run(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.poll(ctx); err != nil && ctx.Err() == nil {
			m.log.Debug("poll etcd's space", zap.Error(err))
		}
	}
}

// poll reads the status of every endpoint and the alarms, and publishes them.
func (m *spaceMonitor) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	written := m.written.Load()
	noSpaceSeen := m.noSpace.Load()
	refused := m.refused.Swap(false)
	sp := Space{Polled: time.Now()}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		errs  []error
		polls int
	)
	endpoints := m.cli.Endpoints()
	if len(endpoints) == 0 {
		// A client of an embedded etcd in process: its one member answers whatever the
		// endpoint.
		endpoints = []string{""}
	}
	for _, ep := range endpoints {
		wg.Go(func() {
			st, err := m.cli.Status(ctx, ep)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			polls++
			sp.NoSpace = sp.NoSpace || statusNoSpace(st)
			sp.DBSize = max(sp.DBSize, st.DbSize)
			sp.DBSizeInUse = max(sp.DBSizeInUse, st.DbSizeInUse)
			sp.Quota = max(sp.Quota, st.DbSizeQuota)
		})
	}
	wg.Wait()
	if polls == 0 {
		return errors.Join(errs...)
	}
	if sp.Quota == 0 {
		sp.Quota = m.quota
	}
	switch {
	case m.limit > 0:
		sp.Limit = m.limit
	case m.limit == 0 && sp.Quota > 0:
		sp.Limit = sp.Quota / 4 * 3
	}
	m.polled.Store(&sp)
	m.written.Add(-m.lastPoll)
	m.lastPoll = written - m.lastPoll
	if !sp.NoSpace && noSpaceSeen {
		m.noSpace.CompareAndSwap(true, false)
	}
	m.logTransitions(sp, refused)
	return nil
}

// logTransitions logs the start and end of a NOSPACE alarm and of refusing writes, once each.
func (m *spaceMonitor) logTransitions(sp Space, refused bool) {
	fields := []zap.Field{zap.Int64("db-size", sp.DBSize), zap.Int64("db-size-in-use", sp.DBSizeInUse),
		zap.Int64("quota", sp.Quota), zap.Int64("limit", sp.Limit)}
	switch {
	case sp.NoSpace && !m.alarmLogged && m.managed:
		m.alarmLogged = true
		m.log.Warn("the embedded etcd raised its NOSPACE alarm; writes are refused with QuotaExceeded until its compactor has freed space and disarmed it", fields...)
	case sp.NoSpace && !m.alarmLogged:
		m.alarmLogged = true
		// One line for the operator: no stack trace, which says nothing here.
		m.log.WithOptions(zap.AddStacktrace(zap.FatalLevel)).Error("etcd raised its NOSPACE alarm: it refuses every write (zetcd answers writes with QuotaExceeded, and serves reads) "+
			"until an operator frees space: delete data (or raise etcd's --quota-backend-bytes), then run "+
			"`etcdctl compact <revision>` (the revision from `etcdctl endpoint status -w json`), "+
			"`etcdctl defrag --cluster` and `etcdctl alarm disarm`",
			append(fields, zap.Strings("endpoints", m.cli.Endpoints()))...)
	case !sp.NoSpace && m.alarmLogged:
		m.alarmLogged = false
		m.log.Info("etcd's NOSPACE alarm is cleared", fields...)
	}
	switch {
	case sp.NoSpace:
		// Refusals are the alarm's, said above.
	case refused && !m.limitLogged:
		m.limitLogged = true
		m.log.Warn("zetcd's data reached its limit: writes that would grow it are refused with QuotaExceeded until data is deleted (and etcd has compacted it)", fields...)
	case !refused && m.limitLogged && m.fits(0):
		m.limitLogged = false
		m.log.Info("zetcd's data is below its limit again", fields...)
	}
}

// statusNoSpace reports whether a member's status lists a NOSPACE alarm. Its Errors name the
// cluster's alarms (as "memberID:… alarm:NOSPACE"); listing them with AlarmList instead would
// cost a raft proposal, a disk write, at every poll.
func statusNoSpace(st *clientv3.StatusResponse) bool {
	for _, e := range st.Errors {
		if strings.Contains(e, pb.AlarmType_NOSPACE.String()) {
			return true
		}
	}
	return false
}

// isNoSpace reports whether err is etcd refusing a write for its NOSPACE alarm.
func isNoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace)
}

// spaceKV counts the bytes of every put it sends (plain puts and the puts of a Txn's larger
// branch) into a spaceMonitor.
type spaceKV struct {
	clientv3.KV
	m *spaceMonitor
}

func (k *spaceKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	k.m.wrote(int64(len(key)+len(val)) + writeOverhead)
	return k.KV.Put(ctx, key, val, opts...)
}

func (k *spaceKV) Txn(ctx context.Context) clientv3.Txn { return &spaceTxn{Txn: k.KV.Txn(ctx), m: k.m} }

// spaceTxn counts the puts of its branches when it is committed.
type spaceTxn struct {
	clientv3.Txn
	m                *spaceMonitor
	thenPut, elsePut int64
}

func putBytes(ops []clientv3.Op) int64 {
	var n int64
	for _, op := range ops {
		if op.IsPut() {
			n += int64(len(op.KeyBytes())+len(op.ValueBytes())) + writeOverhead
		}
	}
	return n
}

func (t *spaceTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *spaceTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenPut += putBytes(ops)
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *spaceTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elsePut += putBytes(ops)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *spaceTxn) Commit() (*clientv3.TxnResponse, error) {
	t.m.wrote(max(t.thenPut, t.elsePut))
	return t.Txn.Commit()
}

// NearLimit reports whether the data is within an eighth of its limit (or etcd's file within a
// sixteenth of its quota of the hard limit, or the NOSPACE alarm raised): the embedded etcd's
// compactor then compacts often, so that deleted data frees room soon.
func (b *Store) NearLimit() bool {
	sp, r := b.space.polled.Load(), b.space.room()
	if sp == nil {
		return false
	}
	return sp.NoSpace || sp.Limit > 0 && r.grow < sp.Limit/8 || sp.Quota > 0 && r.put < sp.Quota/16
}

// Space returns what the store knows of etcd's space (as of its last poll, every
// Config.SpacePoll).
func (b *Store) Space() Space { return b.space.space() }

// AppliedRevision is the newest etcd revision the watch feed has received: history up to it
// may be compacted without breaking the feed, which watches again from the revision after it
// (internal/embedetcd's compactor). The replica may be further on: the committer applies its
// own writes before etcd's watch brings them (own.go).
func (b *Store) AppliedRevision() int64 { return b.feedNext.Load() - 1 }

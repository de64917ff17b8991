// Package migrate keeps a copy of a running ZooKeeper in zetcd's store: internal/zklive follows
// ZooKeeper's changes and an etcdstore.Mirror writes them exactly (docs/migration.md, "Migration
// mode"). Status tells how far the copy is.
//
//	m := migrate.Start(ctx, migrate.Config{ZooKeeper: zklive.Config{Servers: addrs}, Mirror: mc})
//	st := m.Status()
package migrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/zkdata"
	"github.com/zetcd/zetcd/internal/zklive"
)

// Config configures a migration.
type Config struct {
	// ZooKeeper says how to reach and read the ZooKeeper copied.
	ZooKeeper zklive.Config
	// Mirror says where the copy is written; its Timeouts and Source are filled in.
	Mirror etcdstore.MirrorConfig
	Logger *zap.Logger
	// LastInterval is how often ZooKeeper's last zxid is read (default 1 s), against which the
	// copy's lag is measured.
	LastInterval time.Duration
	// Loaded, if set, is called once the initial tree is written, before the state leaves
	// loading; its error fails the migration. While the tree loads nothing else may write to
	// etcd (etcdstore.Import numbers zxids by the revisions its writes get).
	Loaded func(context.Context) error
	// SyncInterval is how often the follower is made to report every change up to ZooKeeper's
	// last zxid (default 10 s; Follower.Sync, which also reads every ACL again if a transaction
	// without an event came, as a setACL): the copy then holds ZooKeeper's last zxid even while
	// ZooKeeper is idle. The follower does so on its own at each ping, a third of its session
	// timeout, but for setACLs, which its sweeps read at most every zklive.Config.SweepInterval.
	SyncInterval time.Duration
}

// The states of a migration.
const (
	StateLoading   = "loading"   // reading ZooKeeper's tree and writing it
	StateFollowing = "following" // writing ZooKeeper's changes; the copy is behind its last zxid
	StateCaughtUp  = "caught-up" // the copy holds every transaction up to ZooKeeper's last zxid read, setACLs included
	StateFailed    = "failed"    // stopped; Errors says why
)

// Status is how far a migration is.
type Status struct {
	State string `json:"state"`
	// ZooKeeperZxid is ZooKeeper's newest zxid seen; CopyZxid the newest up to which every
	// transaction is in the copy (hex, as ZooKeeper shows zxids).
	ZooKeeperZxid string `json:"zookeeperZxid"`
	CopyZxid      string `json:"copyZxid"`
	// LagZxids is ZooKeeper's newest zxid less the copy's; LagSeconds how long ago ZooKeeper's
	// first zxid not in the copy was seen (0 when caught up).
	LagZxids   int64   `json:"lagZxids"`
	LagSeconds float64 `json:"lagSeconds"`
	// Pending counts the nodes whose newest state is not written yet.
	Pending int `json:"pending"`
	// SkippedEphemerals counts ephemerals left out: their sessions' ids cannot be etcd leases.
	SkippedEphemerals int `json:"skippedEphemerals"`
	// Padding counts the etcd revisions spent keeping the copy's zxids above ZooKeeper's: the
	// load's, and 65,536 at most for each ZooKeeper epoch begun since (a leader election).
	// UnpaddedZxid is the newest ZooKeeper zxid the copy numbered below itself, the padding's
	// bound being spent (absent: none).
	Padding      int64     `json:"padding"`
	UnpaddedZxid string    `json:"unpaddedZxid,omitempty"`
	Started      time.Time `json:"started"`
	// Errors are the newest errors met, each with its time, the one it failed of last.
	Errors []string `json:"errors,omitempty"`
}

// Migration is one running copy.
type Migration struct {
	cfg    Config
	log    *zap.Logger
	wake   chan struct{}
	done   chan struct{}
	err    error
	cancel context.CancelFunc

	following chan struct{} // closed once f is set
	f         *zklive.Follower
	mirror    *etcdstore.Mirror // set before run starts copying

	mu       sync.Mutex
	status   Status
	zkZxid   int64
	copyZxid int64
	synced   int64      // the newest zxid Sync returned
	seen     []seenZxid // ZooKeeper's zxids above the copy's, with when they were seen
}

type seenZxid struct {
	zxid int64
	at   time.Time
}

// Start starts copying and returns at once; the copy runs until ctx ends or it fails.
func Start(ctx context.Context, cfg Config) *Migration {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.LastInterval <= 0 {
		cfg.LastInterval = time.Second
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 10 * time.Second
	}
	if cfg.ZooKeeper.Log == nil {
		cfg.ZooKeeper.Log = cfg.Logger
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &Migration{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), done: make(chan struct{}), cancel: cancel,
		following: make(chan struct{})}
	m.status = Status{State: StateLoading, Started: time.Now().UTC()}
	go func() {
		defer cancel()
		defer close(m.done)
		m.err = m.run(ctx)
		if m.err != nil && ctx.Err() == nil {
			m.log.Error("migration failed", zap.Error(m.err))
			m.mu.Lock()
			m.status.State = StateFailed
			m.status.Errors = append(m.status.Errors, m.err.Error())
			m.mu.Unlock()
		}
	}()
	return m
}

// Wait blocks until the migration stops, and returns why.
func (m *Migration) Wait() error {
	<-m.done
	return m.err
}

// Done is closed once the migration stops.
func (m *Migration) Done() <-chan struct{} { return m.done }

// Stop stops the copy, its follower and its mirror, and waits for them. The mirror no longer
// keeps the sessions' leases alive (Mirror.Close).
func (m *Migration) Stop() {
	m.cancel()
	<-m.done
}

// CatchUp waits until the copy holds every transaction up to ZooKeeper's last zxid, setACLs
// included (Follower.Sync), and returns that zxid: the state caught-up, at a zxid read now.
func (m *Migration) CatchUp(ctx context.Context) (int64, error) {
	select {
	case <-m.following:
	case <-m.done:
		return 0, fmt.Errorf("migration: stopped: %w", m.err)
	case <-ctx.Done():
		return 0, fmt.Errorf("migration: still loading: %w", ctx.Err())
	}
	z, err := m.f.Sync(ctx)
	if err != nil {
		return 0, fmt.Errorf("migration: sync with ZooKeeper: %w", err)
	}
	m.observe(z, true)
	m.signal()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		m.mu.Lock()
		written, state := m.copyZxid, m.status.State
		m.mu.Unlock()
		switch {
		case state == StateFailed:
			return 0, fmt.Errorf("migration: failed: %w", m.err)
		case written >= z:
			return z, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("migration: the copy is at %#x, ZooKeeper at %#x: %w", written, z, ctx.Err())
		case <-m.done:
			return 0, fmt.Errorf("migration: stopped: %w", m.err)
		case <-t.C:
		}
	}
}

// Mapped returns every ZooKeeper zxid the copy wrote and its zetcd zxid (Mirror.Mapped), the
// table a cutover leaves (etcdstore.ZxidTable). Only once the migration stopped (Stop).
func (m *Migration) Mapped() (map[int64]encoding.Zxid, error) {
	select {
	case <-m.done:
	default:
		return nil, errors.New("migration: the copy still runs")
	}
	if m.mirror == nil {
		return nil, errors.New("migration: nothing was copied")
	}
	return m.mirror.Mapped(), nil
}

// SessionID is the id of the session that follows ZooKeeper (0 while it has none).
func (m *Migration) SessionID() int64 {
	select {
	case <-m.following:
		return m.f.SessionID()
	default:
		return 0
	}
}

// Status returns the migration's status now.
func (m *Migration) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	s.Errors = append([]string(nil), s.Errors...)
	s.ZooKeeperZxid, s.CopyZxid = fmt.Sprintf("%#x", m.zkZxid), fmt.Sprintf("%#x", m.copyZxid)
	s.LagZxids = max(0, m.zkZxid-m.copyZxid)
	if len(m.seen) > 0 {
		s.LagSeconds = time.Since(m.seen[0].at).Seconds()
	}
	return s
}

func (m *Migration) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Migration) run(ctx context.Context) error {
	mc := m.cfg.Mirror
	if mc.Logger == nil {
		mc.Logger = m.log
	}
	if mc.Source == "" {
		mc.Source = fmt.Sprint(m.cfg.ZooKeeper.Servers)
	}
	mc.Timeouts = m.timeouts
	mirror := etcdstore.NewMirror(mc)
	m.mirror = mirror
	defer mirror.Close()
	f, st, err := m.follow(ctx, mirror)
	if err != nil {
		return err
	}
	m.observe(st.LastZxid, false)
	for _, s := range st.Skipped {
		m.log.Info("migration: initial read", zap.String("note", s))
	}
	res, err := mirror.Load(ctx, st, f.Settled())
	if err != nil {
		return err
	}
	if m.cfg.Loaded != nil {
		if err := m.cfg.Loaded(ctx); err != nil {
			return err
		}
	}
	m.log.Info("migration: following ZooKeeper", zap.Int("nodes", res.Nodes), zap.Bool("resume-ok", res.ResumeOK))
	m.mu.Lock()
	m.status.State = StateFollowing
	m.mu.Unlock()
	m.f = f
	close(m.following)
	stopped := make(chan error, 1)
	go func() { stopped <- f.Wait() }()
	go m.syncLoop(ctx, f)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	pause := time.Duration(0)
	for {
		prog, err := mirror.Flush(ctx, f.Settled())
		switch {
		case err == nil:
			pause = 0
		case errors.Is(err, etcdstore.ErrCopyImpossible) || ctx.Err() != nil:
			return err
		default:
			// etcd's: the batch was not written, or will be written again.
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
			m.log.Warn("migration: writing the copy, again after a pause", zap.Error(err), zap.Duration("pause", pause))
			m.note(err)
		}
		m.progress(prog)
		if pause > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-stopped:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("migration: the follower of ZooKeeper stopped: %w", err)
		case <-m.wake:
		case <-tick.C:
		}
	}
}

// follow starts following ZooKeeper, again with a growing pause until its initial read
// succeeds, ctx ends, or a node is unreadable.
func (m *Migration) follow(ctx context.Context, mirror *etcdstore.Mirror) (*zklive.Follower, *zkdata.State, error) {
	pause := 100 * time.Millisecond
	for {
		f, st, err := zklive.Follow(ctx, m.cfg.ZooKeeper, func(c zklive.Change) {
			mirror.Change(c.Path, c.Node)
			m.signal()
		})
		switch {
		case err == nil:
			return f, st, nil
		case ctx.Err() != nil || errors.Is(err, zklive.ErrUnreadable):
			return nil, nil, fmt.Errorf("migration: follow ZooKeeper: %w", err)
		}
		m.log.Warn("migration: reading ZooKeeper's tree again", zap.Error(err), zap.Duration("pause", pause))
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// syncLoop reads ZooKeeper's last zxid every LastInterval, against which the copy's lag is
// measured, and in a loop of its own every SyncInterval waits for the follower to report every
// change up to it (Follower.Sync).
func (m *Migration) syncLoop(ctx context.Context, f *zklive.Follower) {
	go m.every(ctx, m.cfg.SyncInterval, f.Sync, true)
	m.every(ctx, m.cfg.LastInterval, f.Last, false)
}

// every calls read every interval and observes the zxid it returns; synced says that read is
// Sync's.
func (m *Migration) every(ctx context.Context, interval time.Duration, read func(context.Context) (int64, error), synced bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		z, err := read(ctx)
		switch {
		case err == nil:
			m.observe(z, synced)
			m.signal()
		case ctx.Err() != nil || errors.Is(err, zklive.ErrUnreadable):
			return
		default:
			m.log.Debug("migration: reading ZooKeeper's last zxid", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxErrors bounds the errors Status keeps, the newest.
const maxErrors = 10

// note records an error the migration goes on after.
func (m *Migration) note(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status.Errors = append(m.status.Errors, time.Now().UTC().Format(time.RFC3339)+" "+err.Error())
	if n := len(m.status.Errors); n > maxErrors {
		m.status.Errors = m.status.Errors[n-maxErrors:]
	}
}

// observe records zxid as seen on ZooKeeper now; synced says that the follower has reported
// every change up to it, setACLs included (Follower.Sync).
func (m *Migration) observe(zxid int64, synced bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if synced {
		m.synced = max(m.synced, zxid)
	}
	defer m.updateState()
	if zxid <= m.zkZxid {
		return
	}
	m.zkZxid = zxid
	if zxid > m.copyZxid {
		m.seen = append(m.seen, seenZxid{zxid: zxid, at: time.Now()})
	}
}

// progress records the copy's progress.
func (m *Migration) progress(p etcdstore.MirrorProgress) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.copyZxid = max(m.copyZxid, p.Written)
	m.zkZxid = max(m.zkZxid, m.copyZxid) // what was written, ZooKeeper had
	m.status.Pending, m.status.SkippedEphemerals, m.status.Padding = p.Pending, p.SkippedEphemerals, p.Padding
	if p.Unpadded != 0 {
		m.status.UnpaddedZxid = fmt.Sprintf("%#x", p.Unpadded)
	}
	i := 0
	for i < len(m.seen) && m.seen[i].zxid <= m.copyZxid {
		i++
	}
	m.seen = m.seen[i:]
	m.updateState()
}

func (m *Migration) updateState() {
	if m.status.State == StateFailed || m.status.State == StateLoading {
		return
	}
	// A setACL fires no watch: the copy holds it once a Sync has swept the ACLs past it.
	if m.copyZxid >= m.zkZxid && m.synced >= m.zkZxid {
		m.status.State = StateCaughtUp
	} else {
		m.status.State = StateFollowing
	}
}

// timeouts asks ZooKeeper's servers (`cons`) for the timeouts of sessions first seen owning
// ephemerals.
func (m *Migration) timeouts(ids []int64) map[int64]int32 {
	nodes := make(map[string]*zkdata.Node, len(ids))
	for _, id := range ids {
		p := fmt.Sprintf("%#x", id)
		nodes[p] = &zkdata.Node{Path: p}
		nodes[p].Stat.EphemeralOwner = encoding.SessionID(id)
	}
	sessions, notes := zklive.Sessions(m.cfg.ZooKeeper, nodes)
	for _, n := range notes {
		m.log.Info("migration: session timeout", zap.String("note", n))
	}
	out := make(map[int64]int32, len(sessions))
	for id, s := range sessions {
		out[id] = s.Timeout
	}
	return out
}

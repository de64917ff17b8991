package embedetcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// CompactorConfig configures the compactor of an embedded etcd (StartCompactor).
type CompactorConfig struct {
	// Applied returns the newest revision zetcd's watch feed has applied (etcdstore's
	// Store.AppliedRevision): compaction never goes past it, so the feed's watch is never
	// compacted out from under it. Nil: etcd's current revision.
	Applied func() int64
	// Pressure, if set, reports that zetcd's data is near its limit (etcdstore's
	// Store.NearLimit): history is then compacted every Policy.PressureInterval, so that the
	// space of deleted data is free again soon.
	Pressure func() bool
	// Policy is when to compact and defragment; zero fields take Compaction's defaults, and
	// Retention defaults to Config.CompactionRetention.
	Policy Compaction
	// Logger (default: the etcd's Config.Logger).
	Logger *zap.Logger
}

// compactor runs Compaction against one embedded etcd. Its goroutine owns state.
type compactor struct {
	cli      *clientv3.Client
	endpoint string
	quota    int64
	policy   Compaction
	applied  func() int64
	pressure func() bool
	log      *zap.Logger
	state    policyState
	// alarmed is set while a NOSPACE alarm episode lasts, to log it once.
	alarmed bool

	cancel context.CancelFunc
	done   chan struct{}
}

// StartCompactor starts the embedded etcd's compactor (Compaction); Close stops it. The etcd
// must have been started with Config.Compactor (its own periodic compactor is then off: this is
// its only one). It may be started once.
func (e *Etcd) StartCompactor(cfg CompactorConfig) error {
	c, err := e.newCompactor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.ownCompactor || e.compactor != nil {
		cancel()
		c.cli.Close()
		return errors.New("embedetcd: compactor already started, or not asked for (Config.Compactor)")
	}
	e.compactor = c
	go c.run(ctx)
	return nil
}

// newCompactor makes a compactor of e with its own client; the caller closes that client.
func (e *Etcd) newCompactor(cfg CompactorConfig) (*compactor, error) {
	cli, err := e.Client()
	if err != nil {
		return nil, err
	}
	return &compactor{
		cli:      cli,
		endpoint: e.Endpoint,
		quota:    e.Quota,
		policy:   cfg.Policy.withDefaults(e.Quota, e.retention),
		applied:  cfg.Applied,
		pressure: cfg.Pressure,
		log:      cmp.Or(cfg.Logger, e.log),
	}, nil
}

// RecoverSpace compacts, defragments and disarms a NOSPACE alarm that is raised, before anyone
// watches etcd (every revision may be compacted): etcd keeps the alarm across restarts and
// refuses writes under it, those zetcd makes as it starts included, so the compactor, started
// once zetcd's store is up, would never run. It fails if the alarm stays raised: the data does
// not fit well under the quota.
func (e *Etcd) RecoverSpace(ctx context.Context, log *zap.Logger) error {
	c, err := e.newCompactor(CompactorConfig{Logger: log})
	if err != nil {
		return err
	}
	defer c.cli.Close()
	o, err := c.observe(ctx)
	if err != nil || !o.alarm {
		return err
	}
	c.alarmed = true // defragment clears it once disarmed
	c.log.Warn("embedded etcd starts with its NOSPACE alarm raised; compacting, defragmenting and disarming it",
		zap.Int64("db-size", o.dbSize), zap.Int64("db-size-in-use", o.inUse), zap.Int64("quota", c.quota))
	if err := c.compact(ctx, o.rev, "alarm", o); err != nil {
		return err
	}
	if o, err = c.observe(ctx); err != nil {
		return err
	}
	if err := c.defragment(ctx, o); err != nil {
		return err
	}
	if c.alarmed {
		return fmt.Errorf("embedetcd: etcd's NOSPACE alarm stays raised: its database does not fit well under the quota (%d bytes) even compacted and defragmented", c.quota)
	}
	return nil
}

// stop stops the compactor and waits for it.
func (c *compactor) stop() {
	c.cancel()
	<-c.done
	c.cli.Close()
}

func (c *compactor) run(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.policy.Interval)
	defer t.Stop()
	for {
		if err := c.tick(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("etcd compactor", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe reads etcd's status and alarms, and the feed's applied revision.
func (c *compactor) observe(ctx context.Context) (observation, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.cli.Status(ctx, c.endpoint)
	if err != nil {
		return observation{}, err
	}
	o := observation{now: time.Now(), rev: st.Header.Revision, dbSize: st.DbSize, inUse: st.DbSizeInUse, applied: st.Header.Revision}
	if c.applied != nil {
		o.applied = min(c.applied(), o.rev)
	}
	if c.pressure != nil {
		o.pressure = c.pressure()
	}
	// The status names the alarms ("memberID:… alarm:NOSPACE"); AlarmList would cost a raft
	// proposal, a disk write, at every tick.
	for _, e := range st.Errors {
		o.alarm = o.alarm || strings.Contains(e, pb.AlarmType_NOSPACE.String())
	}
	return o, nil
}

// tick is one round of the policy: observe, compact, defragment, disarm.
func (c *compactor) tick(ctx context.Context) error {
	o, err := c.observe(ctx)
	if err != nil {
		return err
	}
	if c.state.compactedAt.IsZero() {
		// What is in use at start counts as data, not as history written since.
		c.state.compactedAt, c.state.inUseAfter = o.now, o.inUse
	}
	if o.alarm && !c.alarmed {
		c.alarmed = true
		c.log.Warn("embedded etcd raised its NOSPACE alarm; compacting, defragmenting and disarming it",
			zap.Int64("db-size", o.dbSize), zap.Int64("db-size-in-use", o.inUse), zap.Int64("quota", c.quota))
	}
	rev, reason := c.policy.compaction(&c.state, o)
	if rev == 0 {
		if c.policy.defrag(&c.state, o, c.quota) {
			return c.defragment(ctx, o)
		}
		return nil
	}
	if err := c.compact(ctx, rev, reason, o); err != nil {
		return err
	}
	if o, err = c.observe(ctx); err != nil {
		return err
	}
	c.state.inUseAfter = o.inUse
	if c.policy.defrag(&c.state, o, c.quota) {
		return c.defragment(ctx, o)
	}
	return nil
}

// compact compacts history up to rev and waits until the space is free.
func (c *compactor) compact(ctx context.Context, rev int64, reason string, o observation) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := c.cli.Compact(cctx, rev, clientv3.WithCompactPhysical())
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return err
	}
	c.state.compacted, c.state.compactedAt = rev, o.now
	c.log.Debug("compacted etcd history", zap.Int64("revision", rev), zap.String("reason", reason),
		zap.Int64("db-size", o.dbSize), zap.Int64("db-size-in-use", o.inUse))
	return nil
}

// defragment defragments etcd (it serves no request meanwhile), then disarms a NOSPACE alarm
// if the file is well below the quota again.
func (c *compactor) defragment(ctx context.Context, before observation) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := c.cli.Defragment(dctx, c.endpoint); err != nil {
		return err
	}
	c.state.defragAt = time.Now()
	after, err := c.observe(ctx)
	if err != nil {
		return err
	}
	c.log.Info("defragmented etcd", zap.Int64("db-size-before", before.dbSize), zap.Int64("db-size", after.dbSize),
		zap.Int64("db-size-in-use", after.inUse), zap.Duration("took", time.Since(start)))
	if !after.alarm {
		c.alarmed = false
		return nil
	}
	if !disarm(after.dbSize, c.quota) {
		return nil
	}
	members, err := c.cli.AlarmList(ctx)
	if err != nil {
		return err
	}
	for _, a := range members.Alarms {
		if a.Alarm != pb.AlarmType_NOSPACE {
			continue
		}
		if _, err := c.cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			return err
		}
	}
	c.alarmed = false
	c.log.Warn("disarmed the embedded etcd's NOSPACE alarm", zap.Int64("db-size", after.dbSize), zap.Int64("quota", c.quota))
	return nil
}

// stopCompactor stops the compactor if one runs.
// StopCompactor stops the compactor StartCompactor started, if any; StartCompactor may then
// start another (migration mode's, which nothing watches, gives way to the store's at the
// cutover).
func (e *Etcd) StopCompactor() { e.stopCompactor() }

func (e *Etcd) stopCompactor() {
	e.mu.Lock()
	c := e.compactor
	e.compactor = nil
	e.mu.Unlock()
	if c != nil {
		c.stop()
	}
}

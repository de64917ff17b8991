package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/zklive"
	"github.com/zetcd/zetcd/migrate"
)

// The copier is the one process of a migration, the first to claim it in etcd (agreement.go), that
// copies ZooKeeper into the store and runs the cutover's steps (docs/migration.md, "Several
// processes"). A copy does not resume: a process elected after the first copier finds the
// import marker, and fails the migration on every process.

// copyStatusInterval is how often the copier publishes the copy's status.
const copyStatusInterval = 500 * time.Millisecond

// claimInterval is how often a process that does not copy tries to become the copier.
const claimInterval = time.Second

// runCopier claims to be the copier until it is (or ctx ends), and then runs the copy until
// ctx ends.
func (mg *migrator) runCopier(ctx context.Context) {
	defer mg.copying.Done()
	if !mg.claim(ctx) {
		return
	}
	mg.log.Info("migration: this process is the copier", zap.String("process", mg.ag.id))
	why, err := mg.copyRefusal(ctx)
	for err != nil {
		mg.log.Warn("migration: reading the store before copying, again after a pause", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		why, err = mg.copyRefusal(ctx)
	}
	if why != "" {
		mg.log.Error("migration failed", zap.String("error", why))
		mg.ag.loaded(ctx)
		if err := mg.ag.fail(ctx, why); err != nil {
			mg.log.Warn("migration: recording the failure", zap.Error(err))
		}
		return
	}
	m := migrate.Start(ctx, migrate.Config{
		ZooKeeper: zklive.Config{Servers: mg.o.migrate.from, Auth: mg.o.migrate.auth, Log: mg.log.Named("zklive")},
		Mirror:    mg.mc,
		Logger:    mg.log.Named("migrate"),
		Loaded:    mg.loaded,
	})
	mg.mu.Lock()
	mg.m = m
	mg.mu.Unlock()
	mg.publish(ctx, m)
	<-m.Done()
}

// claim tries to become the copier every claimInterval until it is, or ctx ends.
func (mg *migrator) claim(ctx context.Context) bool {
	for {
		ok, err := mg.ag.claim(ctx)
		if ok {
			return true
		}
		if err != nil && ctx.Err() == nil {
			mg.log.Debug("migration: claiming the copy", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(claimInterval):
		}
	}
}

// copyRefusal says why a newly elected copier may not copy: the migration failed, or an
// earlier copier's copy is in the prefix, which does not resume.
func (mg *migrator) copyRefusal(ctx context.Context) (string, error) {
	c, err := mg.ag.read(ctx)
	if err != nil || c.failed != "" {
		return c.failed, err
	}
	marker, ok, err := etcdstore.ImportMarker(ctx, mg.etcd.cli, mg.o.prefix)
	if err != nil || !ok {
		return "", err
	}
	return fmt.Sprintf("the copier of this migration went away, and a copy does not resume (%s): clients stay on ZooKeeper; stop every zetcd, delete the prefix, start again", marker), nil
}

// loaded ends the copy's load for the agreement: the other processes write again, again after
// etcd's errors until ctx ends.
func (mg *migrator) loaded(ctx context.Context) error {
	for {
		err := mg.ag.loaded(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		mg.log.Warn("migration: ending the load for the other processes, again after a pause", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// publish puts the copy's status every copyStatusInterval until ctx ends, once it is loaded,
// and fails the migration on every process if the copy fails.
func (mg *migrator) publish(ctx context.Context, m *migrate.Migration) {
	t := time.NewTicker(copyStatusInterval)
	defer t.Stop()
	for {
		if m.Status().State != migrate.StateLoading {
			if err := mg.ag.publishStatus(ctx, m); err != nil && ctx.Err() == nil {
				mg.log.Debug("migration: publishing the copy's status", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.Done():
			if st := m.Status(); st.State == migrate.StateFailed && ctx.Err() == nil {
				mg.ag.loaded(ctx)
				mg.ag.publishStatus(ctx, m)
				mg.ag.fail(ctx, fmt.Sprintf("the copy failed: %v", st.Errors))
			}
			return
		case <-t.C:
		}
	}
}

// cutoverRun is one cutover the copier runs: the common cutover as it last wrote it, at
// revision rev of its key.
type cutoverRun struct {
	mg      *migrator
	m       *migrate.Migration
	cc      etcdstore.CutoverConfig
	cut     commonCutover
	rev     int64
	granted []int64 // the leases TakeOver granted
	stopped bool    // the copy stopped
	// last is ZooKeeper's last zxid at the cutover, the cutover's ZxidTable's Last.
	last int64
}

// coordinate runs the cutover cut, asked at revision rev of its key; a failure before the
// import marker's deletion hands every process back to relaying, and, if the copy had
// stopped, fails the migration.
func (mg *migrator) coordinate(cut commonCutover, rev int64) {
	r := &cutoverRun{mg: mg, m: mg.copy(), cut: cut, rev: rev,
		cc: etcdstore.CutoverConfig{Client: mg.etcd.cli, LeaseClient: mg.etcd.leases, Prefix: mg.o.prefix, Logger: mg.log}}
	err := r.run()
	if err == nil {
		return
	}
	mg.log.Warn("cutover failed: handing every process back to relaying", zap.String("cutover", cut.ID), zap.Error(err))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(mg.ctx), cutoverTimeout)
	defer cancel()
	if err := etcdstore.RevokeTakenOver(ctx, r.cc, r.granted); err != nil {
		mg.log.Warn("cutover: revoking the leases taken over", zap.Error(err))
	}
	if r.stopped {
		mg.ag.fail(ctx, fmt.Sprintf("a cutover failed after the copy stopped following ZooKeeper: %v", err))
	}
	r.cut.State, r.cut.Step, r.cut.Error = commonHandedBack, "", err.Error()
	r.handBack()
}

// handBack writes the cutover handed back, again after etcd's errors until it is written, the
// key is no longer the one the copier last wrote (its lease gone, or the cutover done by an
// attempt whose answer was lost), or the migration ends: until then every process holds.
func (r *cutoverRun) handBack() {
	pause := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(r.mg.ctx, 10*time.Second)
		_, err := r.mg.ag.putCutover(ctx, r.rev, r.cut, r.mg.ag.sess.Lease())
		cancel()
		if err == nil || errors.Is(err, errStale) || r.mg.ctx.Err() != nil {
			return
		}
		r.mg.log.Warn("cutover: handing back, again after a pause", zap.Error(err))
		select {
		case <-r.mg.ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// writeTimeout bounds each write of the common cutover; one that fails is made again.
const writeTimeout = 5 * time.Second

// step writes the cutover's step into the common cutover, again after etcd's errors until ctx
// (at most cutoverTimeout) ends.
func (r *cutoverRun) step(ctx context.Context, s string) error {
	r.mg.log.Info("cutover: "+s, zap.String("step", s), zap.String("cutover", r.cut.ID))
	r.cut.Step = s
	ctx, cancel := context.WithTimeout(ctx, cutoverTimeout)
	defer cancel()
	for {
		wctx, wcancel := context.WithTimeout(ctx, writeTimeout)
		rev, err := r.mg.ag.putCutover(wctx, r.rev, r.cut, r.mg.ag.sess.Lease())
		wcancel()
		switch {
		case err == nil:
			r.rev = rev
			return nil
		case errors.Is(err, errStale) || ctx.Err() != nil:
			return fmt.Errorf("cutover: %s: %w", s, err)
		}
		r.mg.log.Warn("cutover: writing the step, again after a pause", zap.String("step", s), zap.Error(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("cutover: %s: %w", s, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *cutoverRun) run() error {
	if st := r.m.Status(); st.State == migrate.StateLoading || st.State == migrate.StateFailed {
		return fmt.Errorf("the copy is %s", st.State)
	}
	// Catching up and padding first, while the relayed sessions still live on ZooKeeper,
	// leaves little to do once their connections are closed: padding past a ZooKeeper epoch
	// takes 65536 etcd revisions, and is not bounded by cutoverTimeout.
	if err := r.step(r.mg.ctx, "catching up"); err != nil {
		return err
	}
	first, cancel := context.WithTimeout(r.mg.ctx, cutoverTimeout)
	z, err := r.m.CatchUp(first)
	cancel()
	if err != nil {
		return err
	}
	if err := r.step(r.mg.ctx, "padding etcd's revision"); err != nil {
		return err
	}
	if err := etcdstore.PadPast(r.mg.ctx, r.cc, z); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.mg.ctx, cutoverTimeout)
	defer cancel()
	held, err := r.holdAll(ctx)
	if err != nil {
		return err
	}
	if err := r.takeOver(ctx, held); err != nil {
		return err
	}
	return r.commit(ctx)
}

// holdAll asks every process to hold new connections, and waits until each process alive then
// reports it holds, with its sessions; a process that goes away before fails the cutover.
func (r *cutoverRun) holdAll(ctx context.Context) ([]sessionRecord, error) {
	r.cut.State = commonHolding
	if err := r.step(ctx, "holding new connections on every process"); err != nil {
		return nil, err
	}
	c, err := r.mg.ag.read(ctx)
	if err != nil {
		return nil, err
	}
	procs := c.processes
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		var waiting []string
		var sessions []sessionRecord
		for p := range procs {
			switch h, ok := c.held[p]; {
			case ok && h.Cutover == r.cut.ID:
				sessions = append(sessions, h.Sessions...)
			case !c.processes[p]:
				return nil, fmt.Errorf("cutover: zetcd process %s went away before it held its connections", p)
			default:
				waiting = append(waiting, p)
			}
		}
		if len(waiting) == 0 {
			return sessions, nil
		}
		for {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("cutover: zetcd processes %v did not hold their connections: %w", waiting, ctx.Err())
			case <-t.C:
			}
			if c, err = r.mg.ag.read(ctx); err == nil {
				break
			}
			r.mg.log.Warn("cutover: reading the processes' reports, again after a pause", zap.Error(err))
		}
	}
}

// takeOver brings the copy up to ZooKeeper's last zxid with no relayed connection left on any
// process, and writes the relayed sessions into the store.
func (r *cutoverRun) takeOver(ctx context.Context, held []sessionRecord) error {
	if err := r.step(ctx, "catching up with the relaying stopped"); err != nil {
		return err
	}
	z, err := r.m.CatchUp(ctx)
	if err != nil {
		return err
	}
	sessions, last := mergeSessions(held)
	r.last = z
	if z < last {
		return fmt.Errorf("cutover: ZooKeeper's last zxid %#x is below %#x, sent to a relayed session: the copy follows another ZooKeeper", z, last)
	}
	if err := etcdstore.PadPast(ctx, r.cc, z); err != nil {
		return err
	}
	if err := r.step(ctx, "taking over the relayed sessions"); err != nil {
		return err
	}
	skipped, granted, err := etcdstore.TakeOver(ctx, r.cc, sessions)
	r.granted = granted
	if err != nil {
		return err
	}
	r.cut.ZooKeeperZxid = fmt.Sprintf("%#x", z)
	for _, s := range sessions {
		r.cut.TakenOver = append(r.cut.TakenOver, fmt.Sprintf("%#x", s.ID))
	}
	for _, id := range skipped {
		r.cut.Skipped = append(r.cut.Skipped, fmt.Sprintf("%#x", id))
		r.mg.log.Warn("cutover: a relayed session's id cannot be an etcd lease: it stays on ZooKeeper", zap.String("session", fmt.Sprintf("%#x", id)))
	}
	return nil
}

// mergeSessions are the sessions of held, each once (a client that moved between processes is
// reported by both), and the newest zxid any was sent.
func mergeSessions(held []sessionRecord) ([]etcdstore.MigratedSession, int64) {
	var out []etcdstore.MigratedSession
	seen := map[int64]bool{}
	var last int64
	for _, s := range held {
		last = max(last, s.LastZxid)
		if !seen[s.ID] {
			seen[s.ID] = true
			out = append(out, s.MigratedSession)
		}
	}
	return out, last
}

// commit stops the copy and deletes the import marker with the common cutover's "done", if the
// cutover key is still the one this run wrote; again after etcd's errors until ctx ends. A
// marker already gone with the cutover done was deleted by an attempt whose answer was lost.
func (r *cutoverRun) commit(ctx context.Context) error {
	if err := r.step(ctx, "deleting the import marker"); err != nil {
		return err
	}
	r.m.Stop()
	r.stopped = true
	zxids, err := r.m.Mapped()
	if err != nil {
		return err
	}
	table := etcdstore.ZxidTable{Last: r.last, Zxids: zxids}
	done := r.cut
	done.State, done.Step = commonDone, ""
	b, _ := json.Marshal(done)
	key := r.mg.ag.base + "cutover"
	guard := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", r.rev)}
	pause := 100 * time.Millisecond
	for {
		err := etcdstore.EndMigrationIf(ctx, r.cc, table, guard, clientv3.OpPut(key, string(b)))
		if errors.Is(err, etcdstore.ErrNoMarker) {
			return r.committed(ctx)
		}
		if err == nil {
			return nil
		}
		r.mg.log.Warn("cutover: deleting the import marker, again after a pause", zap.Error(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// committed tells, after a guarded deletion of the marker failed, whether an earlier attempt
// did it: the common cutover is then done.
func (r *cutoverRun) committed(ctx context.Context) error {
	c, err := r.mg.ag.read(ctx)
	if err != nil {
		return err
	}
	if c.cutover != nil && c.cutover.ID == r.cut.ID && c.cutover.State == commonDone {
		return nil
	}
	return errors.New("cutover: the import marker or the cutover changed under the copier")
}

// copierID is the copier's process id: this process's if it copies, else as the copy's status
// last named it.
func (mg *migrator) copierID() string {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if mg.m != nil {
		return mg.ag.id
	}
	if mg.view.status == nil {
		return ""
	}
	return mg.view.status.Copier
}

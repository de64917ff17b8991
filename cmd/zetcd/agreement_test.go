package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/migrate"
	"go.uber.org/zap"
)

// TestMergeSessions: a session two processes report (its client moved) is taken over once,
// and the newest zxid sent to any is kept.
func TestMergeSessions(t *testing.T) {
	rec := func(id, last int64) sessionRecord {
		return sessionRecord{MigratedSession: etcdstore.MigratedSession{ID: id, TimeoutMs: 4000}, LastZxid: last}
	}
	sessions, last := mergeSessions([]sessionRecord{rec(1, 5), rec(2, 9), rec(1, 7)})
	if len(sessions) != 2 || sessions[0].ID != 1 || sessions[1].ID != 2 || last != 9 {
		t.Errorf("merged %+v, last %d", sessions, last)
	}
}

// TestCutoverRefusal: a cutover is asked for only once the copy follows, with no cutover
// running or done and the migration not failed.
func TestCutoverRefusal(t *testing.T) {
	following := &copierStatus{Status: migrate.Status{State: migrate.StateCaughtUp}}
	for _, c := range []struct {
		c    common
		want string // in the refusal; "" none
	}{
		{common{status: following}, ""},
		{common{status: following, cutover: &commonCutover{State: commonHandedBack}}, ""},
		{common{status: following, cutover: &commonCutover{State: commonHolding}}, "running"},
		{common{status: following, cutover: &commonCutover{State: commonDone}}, "done"},
		{common{status: following, failed: "the copier went away"}, "copier went away"},
		{common{}, "not started"},
		{common{status: &copierStatus{Status: migrate.Status{State: migrate.StateLoading}}}, "loading"},
	} {
		err := cutoverRefusal(c.c)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.c, err, c.want)
		}
	}
}

// TestPutCutoverAnswerLost: a write of the common cutover made again after its answer was lost
// (the first attempt wrote it) succeeds at the key's revision; one made over another write is
// stale.
func TestPutCutoverAnswerLost(t *testing.T) {
	cli := testenv.StartEtcd(t).Client(t)
	a, err := joinAgreement(context.Background(), cli, "/zk/", "zk1:2181", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	ctx := context.Background()
	c := commonCutover{ID: "c1", State: commonHolding, Step: "catching up"}
	rev, err := a.putCutover(ctx, 0, c, a.sess.Lease())
	if err != nil {
		t.Fatal(err)
	}
	// The same write again from the revision it was made at: its answer was lost.
	if again, err := a.putCutover(ctx, 0, c, a.sess.Lease()); err != nil || again != rev {
		t.Errorf("the write made again: revision %d, %v; want %d, nil", again, err, rev)
	}
	// Another write from that revision, or the same from it on no lease, is stale.
	other := c
	other.Step = "padding etcd's revision"
	if _, err := a.putCutover(ctx, 0, other, a.sess.Lease()); !errors.Is(err, errStale) {
		t.Errorf("a write over another: %v, want errStale", err)
	}
	if _, err := a.putCutover(ctx, 0, c, 0); !errors.Is(err, errStale) {
		t.Errorf("the same write on another lease: %v, want errStale", err)
	}
	if next, err := a.putCutover(ctx, rev, other, a.sess.Lease()); err != nil || next <= rev {
		t.Errorf("the next write: revision %d, %v", next, err)
	}
}

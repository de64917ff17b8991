package main

import (
	"strings"
	"testing"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/migrate"
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

package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

// TestEtcdOrphanedSessions: when the zetcd serving a session goes away and the client does not
// come back, the elected leader (another process) ends the session at its timeout exactly as
// its own zetcd would have: ephemerals deleted in one zxid that is also the parent's pzxid,
// cversion moved, events fired with that zxid. A session resumed elsewhere in time is kept.
func TestEtcdOrphanedSessions(t *testing.T) {
	cli := startEtcd(t)
	ctx := context.Background()
	leader, err := New(ctx, Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leader.Close)
	for deadline := time.Now().Add(10 * time.Second); !leader.reaper.leader.Load(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader was not elected within 10s")
		}
	}
	dying, _, _ := newTestBackendOn(t, cli, Config{})

	const timeout = 4 * time.Second
	orphan, err := dying.Connect(ctx, zetcd.ConnectParams{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := dying.Connect(ctx, zetcd.ConnectParams{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := orphan.Create(ctx, &encoding.CreateRequest{Path: "/p", ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    zetcd.Session
		path string
	}{{orphan, "/p/orphan"}, {resumed, "/p/resumed"}} {
		if _, _, err := c.s.Create(ctx, &encoding.CreateRequest{Path: c.path, ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
			t.Fatal(err)
		}
	}

	sink := &recordingSink{}
	watching, err := leader.Connect(ctx, zetcd.ConnectParams{Timeout: 30 * time.Second, Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.GetChildren(ctx, &encoding.GetChildrenRequest{Path: "/p", Watch: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: "/p/orphan", Watch: true}); err != nil {
		t.Fatal(err)
	}

	// The serving process goes away without ending its sessions; one client comes back
	// elsewhere within its timeout.
	dying.Close()
	if _, err := leader.Connect(ctx, zetcd.ConnectParams{SessionID: resumed.ID(), Passwd: resumed.Password(), Timeout: timeout}); err != nil {
		t.Fatal(err)
	}

	var got []string
	for deadline := time.Now().Add(3 * timeout); len(got) < 2; time.Sleep(50 * time.Millisecond) {
		got = append(got, sink.take()...)
		if time.Now().After(deadline) {
			t.Fatalf("events after %v: %v; the orphaned session was not ended", 3*timeout, got)
		}
	}
	resp, _, err := watching.GetData(ctx, &encoding.GetDataRequest{Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	z := resp.Stat.Pzxid
	want := []string{fmt.Sprintf("NodeDeleted /p/orphan @%d", z), fmt.Sprintf("NodeChildrenChanged /p @%d", z)}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v (the parent's pzxid is the zxid of the deletion)", got, want)
	}
	if resp.Stat.Cversion != 3 || resp.Stat.NumChildren != 1 {
		t.Errorf("parent cversion %d numChildren %d, want 3 and 1", resp.Stat.Cversion, resp.Stat.NumChildren)
	}
	if _, err := leader.Connect(ctx, zetcd.ConnectParams{SessionID: orphan.ID(), Passwd: orphan.Password(), Timeout: timeout}); !errors.Is(err, zetcd.ErrSessionExpired) {
		t.Errorf("resuming the orphaned session: %v, want ErrSessionExpired", err)
	}

	// The resumed session outlives its old process's lease TTL and timeout.
	time.Sleep(timeout + 2*time.Second)
	if _, _, err := watching.Exists(ctx, &encoding.ExistsRequest{Path: "/p/resumed"}); err != nil {
		t.Errorf("the resumed session's ephemeral: %v", err)
	}
}

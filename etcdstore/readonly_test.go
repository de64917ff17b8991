package etcdstore

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/zetcd"
)

// TestEtcdReadOnlySessions: once etcd stops, the watch feed falls silent and the store is cut
// off; read-only sessions then read the replica as of the last revision received, are refused
// for a lastZxidSeen ahead of it and for a session that is not a read-only one of this process
// (a global session), resume with their password only, and all end (Done, Err nil) once etcd is
// back and the feed hears it.
func TestEtcdReadOnlySessions(t *testing.T) {
	dir, url := t.TempDir(), "http://"+freeLoopbackAddr(t)
	e, err := embedetcd.Start(embedetcd.Config{Dir: dir, ClientURL: url})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	b, err := New(context.Background(), Config{Client: cli, Logger: zaptest.NewLogger(t), ReapInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rw := openTestSession(t, b)
	_, seen, err := rw.Create(ctx, &encoding.CreateRequest{Path: "/ro", Data: []byte("there"), ACL: openACL})
	if err != nil {
		t.Fatal(err)
	}
	if b.CutOff() {
		t.Fatal("cut off while etcd serves")
	}

	e.Close()
	waitFor(t, 20*time.Second, "the store cut off", b.CutOff)
	if _, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, LastZxidSeen: zxidOf(revOf(seen)+1, 0)}); !errors.Is(err, zetcd.ErrZxidAhead) {
		t.Errorf("lastZxidSeen ahead of the replica: %v, want ErrZxidAhead", err)
	}
	if _, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{SessionID: rw.ID(), Passwd: rw.Password(), Timeout: 10 * time.Second}); !errors.Is(err, zetcd.ErrNotServing) {
		t.Errorf("a global session resumed read-only: %v, want ErrNotServing", err)
	}
	ro, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{Timeout: 10 * time.Second, LastZxidSeen: seen})
	if err != nil {
		t.Fatal(err)
	}
	if top := uint64(ro.ID()) >> 56; top != b.process.id&0xff {
		t.Errorf("read-only session id %v: top byte %#x, want the process id's low byte %#x", ro.ID(), top, b.process.id&0xff)
	}
	resp, _, err := ro.GetData(ctx, &encoding.GetDataRequest{Path: "/ro"})
	if err != nil || string(resp.Data) != "there" {
		t.Fatalf("read-only getData: %v, %v", resp, err)
	}
	// Watches are armed at the replica's revision, without asking etcd for its own.
	if _, err := ro.AddWatch(ctx, &encoding.AddWatchRequest{Path: "/ro", Mode: encoding.AddWatchPersistent}); err != nil {
		t.Errorf("read-only addWatch: %v", err)
	}
	if _, err := ro.SetWatches(ctx, &encoding.SetWatches{RelativeZxid: seen, DataWatches: []string{"/ro"}, ExistWatches: []string{}, ChildWatches: []string{}}); err != nil {
		t.Errorf("read-only setWatches: %v", err)
	}
	if _, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{SessionID: ro.ID(), Passwd: make([]byte, 16), Timeout: 10 * time.Second}); !errors.Is(err, zetcd.ErrSessionExpired) {
		t.Errorf("read-only session resumed with a wrong password: %v, want ErrSessionExpired", err)
	}
	ro.Detach()
	resumed, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{SessionID: ro.ID(), Passwd: ro.Password(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("resume a read-only session: %v", err)
	}
	if err := ro.Expire(ctx); err != nil { // resumed since: a no-op
		t.Fatal(err)
	}
	if _, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{SessionID: ro.ID(), Passwd: ro.Password(), Timeout: 10 * time.Second}); err != nil {
		t.Fatalf("a read-only session expired by a connection it had left: %v", err)
	}

	e, err = embedetcd.Start(embedetcd.Config{Dir: dir, ClientURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	t.Cleanup(b.Close) // before etcd's Close
	select {
	case <-resumed.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("read-only session not ended 30 s after etcd returned")
	}
	if err := resumed.Err(); err != nil {
		t.Errorf("read-only session ended with %v, want nil", err)
	}
	if b.CutOff() {
		t.Error("cut off after the feed heard etcd again")
	}
	if _, err := b.ConnectReadOnly(ctx, zetcd.ConnectParams{SessionID: ro.ID(), Passwd: ro.Password(), Timeout: 10 * time.Second}); !errors.Is(err, zetcd.ErrNotServing) {
		t.Errorf("a read-only session resumed after etcd returned: %v, want ErrNotServing", err)
	}
}

// freeLoopbackAddr is a loopback address with a port free now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

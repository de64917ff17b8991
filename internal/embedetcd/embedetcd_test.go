package embedetcd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestDirs: Dirs names the snapshot and WAL directories a started etcd has created, and both
// hold files (what the dirs and conf four-letter words measure).
func TestDirs(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	snap, wal := Dirs(dir)
	for _, d := range []string{snap, wal} {
		entries, err := os.ReadDir(d)
		if err != nil || len(entries) == 0 {
			t.Errorf("%s: %d entries, %v; want etcd's files", d, len(entries), err)
		}
	}
}

// TestQuietStart: etcd logs no warning or error when it starts with zetcd's settings (and none
// when it stops): each startup warning it has is about a setting, and zetcd sets them so. Its
// HTTP endpoints answer on their own socket.
func TestQuietStart(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	// A directory etcd creates itself (0700): an existing one readable by others gets a warning.
	dir := filepath.Join(t.TempDir(), "etcd")
	e, err := Start(Config{Dir: dir, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	sock, _ := httpSocketURL(dir, false)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock.Path)
	}}}
	resp, err := hc.Get("http://etcd/health")
	if err != nil {
		t.Fatalf("etcd's /health on %s: %v", sock.Path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		t.Errorf("etcd's /health: %s %s", resp.Status, body)
	}
	hc.CloseIdleConnections()
	e.Close()
	for _, ent := range logs.All() {
		if ent.Level == zapcore.WarnLevel && slowness[ent.Message] {
			t.Logf("etcd reports the machine is slow: %q %v", ent.Message, ent.ContextMap())
			continue
		}
		t.Errorf("etcd logged %v %q %v", ent.Level, ent.Message, ent.ContextMap())
	}
}

// slowness are etcd's warnings that a step took longer than it should: on a loaded test machine
// they report the machine, not a setting.
var slowness = map[string]bool{
	"apply request took too long": true,
	"request stats":               true,
	"slow fdatasync":              true,
	"leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk": true,
	"waiting for ReadIndex response took too long, retrying":                                                 true,
}

// TestEndpointIsGRPC: Endpoint is etcd's gRPC listener, never its HTTP socket, however etcd
// orders its listeners (it keeps them in a map): clients of several starts all work.
func TestEndpointIsGRPC(t *testing.T) {
	for i := range 8 {
		e, err := Start(Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		cli, err := e.Client()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Put(ctx, "k", "v")
		cancel()
		cli.Close()
		e.Close()
		if err != nil {
			t.Fatalf("start %d: put through %s: %v", i, e.Endpoint, err)
		}
	}
}

// A cluster of one takes a snapshot every singleMemberSnapshotCount entries, so that raft holds
// no more than that many in memory and a restart replays no more from its log.
func TestSingleMemberSnapshots(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli, _ := e.InProcessClient()
	for i := 0; i < 2*singleMemberSnapshotCount+100; i++ {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := Dirs(dir)
	snaps, err := filepath.Glob(filepath.Join(snap, "*.snap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 2 {
		t.Errorf("%d snapshots after %d entries, want 2 or more: %v", len(snaps), 2*singleMemberSnapshotCount+100, snaps)
	}
}

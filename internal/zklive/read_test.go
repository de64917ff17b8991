package zklive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/internal/zkdata"
	"github.com/zetcd/zetcd/internal/zklive"
)

var openACL = zk.WorldACL(zk.PermAll)

// secretACL lets only the digest user "reader:secret" at a node.
var secretACL = zk.DigestACL(zk.PermAll, "reader", "secret")

// readerAuth is the credentials Read is given.
var readerAuth = []zklive.Auth{{Scheme: "digest", Auth: []byte("reader:secret")}}

// history makes itest.History's history on the ZooKeeper at addr, with an empty node and one
// only readerAuth may read.
func history(t testing.TB, addr string) {
	itest.History(t, addr, 20, func(c *zk.Conn) {
		_, err := c.Create("/app/empty", []byte{}, 0, openACL)
		testenv.Must(t, err)
		_, err = c.Create("/app/secret", []byte("s"), 0, secretACL)
		testenv.Must(t, err)
	})
}

// openEphemerals opens n sessions that each own an ephemeral under /app/live, and leaves them
// open until the test ends.
func openEphemerals(t testing.TB, addr string, n int) {
	t.Helper()
	c := testenv.Connect(t, addr)
	_, err := c.Create("/app/live", nil, 0, openACL)
	testenv.Must(t, err, zk.ErrNodeExists)
	for i := range n {
		s := testenv.Connect(t, addr)
		_, err := s.Create(fmt.Sprintf("/app/live/e%d", i), []byte{byte(i)}, zk.FlagEphemeral, openACL)
		testenv.Must(t, err)
		_, err = s.Create("/app/live/s-", nil, zk.FlagEphemeralSequential, openACL)
		testenv.Must(t, err)
	}
	c.Close()
}

// equalNodes reports every difference between got, read from a live ZooKeeper, and want, as
// zkdata gives it: data (null apart from empty), ACL, children and Stat as a client reads it
// (a container's or TTL node's marker is hidden from clients).
func equalNodes(t testing.TB, got, want map[string]*zkdata.Node) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(want)) {
		w, g := want[p], got[p]
		if g == nil {
			t.Errorf("%s: missing", p)
			continue
		}
		if !bytes.Equal(g.Data, w.Data) || (g.Data == nil) != (w.Data == nil) {
			t.Errorf("%s: data %q (nil %v), want %q (nil %v)", p, g.Data, g.Data == nil, w.Data, w.Data == nil)
		}
		if !slices.Equal(g.ACL, w.ACL) {
			t.Errorf("%s: ACL %v, want %v", p, g.ACL, w.ACL)
		}
		if !slices.Equal(g.Children, w.Children) {
			t.Errorf("%s: children %v, want %v", p, g.Children, w.Children)
		}
		if g.Stat != w.ClientStat() {
			t.Errorf("%s: Stat %+v, want %+v", p, g.Stat, w.ClientStat())
		}
	}
	for p := range got {
		if want[p] == nil {
			t.Errorf("%s: read, but not in the wanted state", p)
		}
	}
}

// TestReadEqualsLoad: Read of a quiescent ZooKeeper gives what zkdata.Load gives for its data
// directory once it is stopped, every field of every node, the sessions with their timeouts and
// the last zxid.
func TestReadEqualsLoad(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	history(t, srv.Addr)
	openEphemerals(t, srv.Addr, 3)

	got, err := zklive.Read(context.Background(), zklive.Config{Servers: []string{srv.Addr}, Auth: readerAuth})
	testenv.Must(t, err)
	srv.Stop() // the open sessions stay open in the directory
	want, err := zkdata.Load(filepath.Join(srv.Dir, "data"), zkdata.Options{})
	testenv.Must(t, err)

	equalNodes(t, got.Nodes, want.Nodes)
	if !maps.Equal(got.Sessions, want.Sessions) {
		t.Errorf("sessions %v, want %v", got.Sessions, want.Sessions)
	}
	if len(got.Sessions) != 3 || len(got.Skipped) != 0 {
		t.Errorf("sessions %v, skipped %q", got.Sessions, got.Skipped)
	}
	// The reader's own session is closed after the read: one transaction more.
	if got.LastZxid+1 != want.LastZxid {
		t.Errorf("last zxid %#x, directory's %#x (the reader's closeSession after it)", got.LastZxid, want.LastZxid)
	}
	t.Logf("%d nodes, %d sessions, last zxid %#x", len(got.Nodes), len(got.Sessions), got.LastZxid)
}

// TestReadCredentials: a node the reader may not read fails Read, naming it, and so does one
// whose ACL it may read without ADMIN (ZooKeeper hides the digests); the super user reads all.
func TestReadCredentials(t *testing.T) {
	super := zk.DigestACL(zk.PermAll, "super", "root")[0].ID
	srv := zkserver.Start(t, zkserver.Options{SystemProps: map[string]string{
		"zookeeper.DigestAuthenticationProvider.superDigest": super,
	}})
	history(t, srv.Addr)
	ctx := context.Background()
	_, err := zklive.Read(ctx, zklive.Config{Servers: []string{srv.Addr}})
	if !errors.Is(err, zklive.ErrUnreadable) || !strings.Contains(err.Error(), "/app/secret") {
		t.Fatalf("Read without credentials: %v, want an error naming /app/secret", err)
	}
	t.Log(err)

	c := testenv.Connect(t, srv.Addr)
	_, err = c.Create("/readonly", []byte("r"), 0, append(zk.DigestACL(zk.PermRead, "reader", "secret"), zk.DigestACL(zk.PermAll, "admin", "pw")...))
	testenv.Must(t, err)
	_, err = zklive.Read(ctx, zklive.Config{Servers: []string{srv.Addr}, Auth: readerAuth})
	if !errors.Is(err, zklive.ErrUnreadable) || !strings.Contains(err.Error(), "/readonly") || !strings.Contains(err.Error(), "hidden") {
		t.Fatalf("Read without ADMIN on /readonly: %v, want an error naming it", err)
	}
	t.Log(err)

	st, err := zklive.Read(ctx, zklive.Config{Servers: []string{srv.Addr}, Auth: []zklive.Auth{{Scheme: "digest", Auth: []byte("super:root")}}})
	testenv.Must(t, err)
	n := st.Nodes["/readonly"]
	if n == nil || len(n.ACL) != 2 || n.ACL[1].ID.ID != zk.DigestACL(zk.PermAll, "admin", "pw")[0].ID {
		t.Fatalf("/readonly read by the super user: %+v", n)
	}
}

// TestReadWithoutCons: a ZooKeeper that refuses `cons` (zkserver needs srvr and conf) leaves the
// sessions' timeouts 0, and State.Skipped says why.
func TestReadWithoutCons(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{ConfigLines: []string{"4lw.commands.whitelist=srvr,conf"}})
	c := testenv.Connect(t, srv.Addr)
	_, err := c.Create("/app", nil, 0, openACL)
	testenv.Must(t, err)
	openEphemerals(t, srv.Addr, 1)
	st, err := zklive.Read(context.Background(), zklive.Config{Servers: []string{srv.Addr}})
	testenv.Must(t, err)
	id := c.SessionID() // not an owner: it owns no ephemeral
	if len(st.Sessions) != 1 || st.Sessions[id].ID != 0 {
		t.Fatalf("sessions %v", st.Sessions)
	}
	for _, s := range st.Sessions {
		if s.Timeout != 0 || int64(st.Nodes["/app/live/e0"].Stat.EphemeralOwner) != s.ID {
			t.Errorf("session %+v", s)
		}
	}
	if len(st.Skipped) != 2 || !strings.Contains(st.Skipped[0], "whitelist") || !strings.Contains(st.Skipped[1], "timeout unknown") {
		t.Errorf("skipped %q", st.Skipped)
	}
}

// TestReadLarge reads a tree of $ZETCD_ZKLIVE_LARGE nodes (skipped when unset) made with
// multis of 500 creates, and logs how long Read takes.
func TestReadLarge(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ZETCD_ZKLIVE_LARGE"))
	if n <= 0 {
		t.Skip("ZETCD_ZKLIVE_LARGE unset")
	}
	srv := zkserver.Start(t, zkserver.Options{})
	bulk(t, srv.Addr, n)
	begin := time.Now()
	st, err := zklive.Read(context.Background(), zklive.Config{Servers: []string{srv.Addr}})
	testenv.Must(t, err)
	t.Logf("read %d nodes in %v", len(st.Nodes), time.Since(begin))
}

// TestConnections reads ZooKeeper's `cons`: every session connected to it, with its client's
// address; a server that does not answer is a note.
func TestConnections(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	a, b := testenv.Connect(t, srv.Addr), testenv.Connect(t, srv.Addr)
	conns, notes := zklive.Connections(zklive.Config{Servers: []string{srv.Addr}})
	if len(notes) != 0 {
		t.Errorf("notes: %v", notes)
	}
	for _, c := range []*zk.Conn{a, b} {
		if addr, ok := conns[c.SessionID()]; !ok || !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("session %#x: %q in %v", c.SessionID(), addr, conns)
		}
	}
	if _, notes := zklive.Connections(zklive.Config{Servers: []string{"127.0.0.1:1"}}); len(notes) != 1 {
		t.Errorf("cons on a closed port: notes %v", notes)
	}
}

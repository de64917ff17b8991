package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/migrate"
)

func TestMigrateFlags(t *testing.T) {
	o, err := parseFlags([]string{"--migrate-from", "zk1:2181,zk2:2181", "--migrate-auth", "digest:u:p", "--migrate-auth", "digest:v:q"})
	testenv.Must(t, err)
	if !o.migrate.on() || strings.Join(o.migrate.from, ",") != "zk1:2181,zk2:2181" || len(o.migrate.auth) != 2 ||
		o.migrate.auth[0].Scheme != "digest" || string(o.migrate.auth[0].Auth) != "u:p" {
		t.Errorf("parsed %+v", o.migrate)
	}
	for _, bad := range [][]string{
		{"--migrate-from", "zk1"},
		{"--migrate-from", "zk1:2181", "--migrate-auth", "digest"},
		{"--migrate-auth", "digest:u:p"},
		{"--migrate-from", "zk1:2181", "--oracle", "zk1:2181"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// getStatus reads GET /migrate.
func getStatus(t testing.TB, addr net.Addr) migrateStatus {
	t.Helper()
	resp, err := http.Get("http://" + addr.String() + "/migrate")
	testenv.Must(t, err)
	defer resp.Body.Close()
	var s migrateStatus
	testenv.Must(t, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

// TestMigrateMode runs zetcd --migrate-from against a ZooKeeper that keeps changing, partly
// through zetcd: a client of zetcd holds a ZooKeeper session, relayed, and /migrate lists it;
// /migrate says caught up once ZooKeeper stops changing; the copy, served by a zetcd started on
// it without its marker, is ZooKeeper's tree (zkctl diff).
func TestMigrateMode(t *testing.T) {
	srv := zkserver.Start(t, zkserver.Options{})
	itest.History(t, srv.Addr, 10, nil)
	live := testenv.Connect(t, srv.Addr) // a session that stays, owning an ephemeral
	_, err := live.Create("/app/live", []byte("here"), zk.FlagEphemeral, openACL)
	testenv.Must(t, err)

	dir := t.TempDir()
	o, err := parseFlags([]string{"--data-dir", dir, "--zkaddr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--migrate-from", srv.Addr})
	testenv.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type addrs struct {
		clients []net.Addr
		metrics net.Addr
	}
	started := make(chan addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveMigrate(ctx, o, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), func(c []net.Addr, m net.Addr) { started <- addrs{c, m} })
	}()
	var a addrs
	select {
	case a = <-started:
	case err := <-done:
		t.Fatalf("migration mode stopped: %v", err)
	}

	// Clients are served by ZooKeeper through zetcd: their sessions and ephemerals are
	// ZooKeeper's, and four-letter words get ZooKeeper's answers.
	zetcdAddr := a.clients[0].String()
	if out, err := zkserver.FourLetterWord(zetcdAddr, "ruok", 10*time.Second); err != nil || out != "imok" {
		t.Errorf("ruok through zetcd in migration mode: %q, %v", out, err)
	}
	relayed := testenv.Connect(t, zetcdAddr)
	_, err = relayed.Create("/app/relayed", []byte("through zetcd"), zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	_, st, err := live.Get("/app/relayed") // read on ZooKeeper itself
	testenv.Must(t, err)
	if st.EphemeralOwner != relayed.SessionID() {
		t.Errorf("ephemeral made through zetcd: owner %#x on ZooKeeper, the client's session %#x", st.EphemeralOwner, relayed.SessionID())
	}
	var listed bool
	for _, rs := range getStatus(t, a.metrics).Relayed {
		listed = listed || rs.ID == fmt.Sprintf("%#x", relayed.SessionID()) && rs.Connected && rs.Ephemerals == 1
	}
	if !listed {
		t.Errorf("/migrate does not list the relayed session %#x, connected with its ephemeral: %+v", relayed.SessionID(), getStatus(t, a.metrics).Relayed)
	}
	relayed.Close() // its ephemeral goes, on ZooKeeper and then in the copy

	// ZooKeeper goes on changing: data, a delete, an ephemeral of a session that closes.
	c := testenv.Connect(t, srv.Addr)
	for i := range 20 {
		_, err := c.Set("/app/cfg", []byte(fmt.Sprint("again ", i)), -1)
		testenv.Must(t, err)
		_, err = c.Create(fmt.Sprintf("/app/more-%d", i), nil, 0, openACL)
		testenv.Must(t, err)
	}
	testenv.Must(t, c.Delete("/app/more-3", -1))
	s := testenv.Connect(t, srv.Addr)
	_, err = s.Create("/app/brief", nil, zk.FlagEphemeral, openACL)
	testenv.Must(t, err)
	s.Close()
	p, err := c.Create("/app/last-", nil, zk.FlagSequence, openACL)
	testenv.Must(t, err)
	_, last, err := c.Exists(p)
	testenv.Must(t, err)

	deadline := time.Now().Add(30 * time.Second)
	for {
		st := getStatus(t, a.metrics)
		var zxid int64
		fmt.Sscanf(st.ZooKeeperZxid, "0x%x", &zxid)
		if st.State == migrate.StateFailed {
			t.Fatalf("/migrate: %+v", st)
		}
		if st.State == migrate.StateCaughtUp && zxid >= last.Czxid {
			t.Logf("/migrate: %+v", st)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/migrate never caught up: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	testenv.Must(t, <-done)

	e := testenv.StartEtcdWith(t, embedetcd.Config{Dir: dir})
	cli := e.Client(t)
	// The live session's ephemeral is on a lease of its id, with its session key: ZooKeeper's
	// password for it and its timeout (from `cons`).
	r, err := cli.Get(context.Background(), fmt.Sprintf("%ss/%016x", o.prefix, live.SessionID()))
	testenv.Must(t, err)
	if len(r.Kvs) != 1 || r.Kvs[0].Lease != live.SessionID() || len(r.Kvs[0].Value) < 20 ||
		int32(binary.BigEndian.Uint32(r.Kvs[0].Value[16:20])) <= 0 {
		t.Errorf("session key of %#x: %v", live.SessionID(), r.Kvs)
	}
	_, err = cli.Delete(context.Background(), o.prefix+"i") // the cutover's business, by hand
	testenv.Must(t, err)
	z := testenv.StartZetcdOn(t, e, testenv.Options{ReapInterval: -1})
	itest.DiffTrees(t, srv.Addr, z.Addr)
	itest.DiffTrees(t, srv.Addr, z.Addr, "--system")
}

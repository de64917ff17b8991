package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// TestMigrateCutoverAfterElection: a client through a zetcd process in migration mode from a
// three-server ZooKeeper reads a node, ZooKeeper's leader stops, and the node is set again in
// ZooKeeper's next epoch (its mzxid, read through zetcd, is ZooKeeper's). After the cutover the
// node's czxid and mzxid are not below those the client read before it, nor are those of a
// node the copy's load wrote, and a write gets a zxid above them and above ZooKeeper's last:
// the copy's zxids stay above ZooKeeper's across ZooKeeper's epochs (docs/migration.md,
// "Cutover", "Zxids").
func TestMigrateCutoverAfterElection(t *testing.T) {
	servers := zkserver.StartEnsemble(t, 3, zkserver.Options{})
	leader := -1
	for i, s := range servers {
		if out, err := zkserver.FourLetterWord(s.Addr, "srvr", 10*time.Second); err == nil && strings.Contains(out, "Mode: leader") {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no server says it leads")
	}
	survivor := servers[(leader+1)%3].Addr
	zc, _, err := zk.Connect([]string{survivor}, 10*time.Second, zk.WithLogInfo(false))
	testenv.Must(t, err)
	_, err = zc.Create("/loaded", []byte("old"), 0, openACL)
	testenv.Must(t, err)
	zc.Close()
	m := itest.StartMigration(t, itest.MigrationOptions{ZooKeeper: servers})
	m.WaitCaughtUp(t, 0)
	loaded := m.Status(t).Padding

	c := connectCutover(t, m.Addr, 10*time.Second)
	_, loadedBefore, err := c.Get("/loaded")
	testenv.Must(t, err)
	_, err = c.Create("/epoch", []byte("one"), 0, openACL)
	testenv.Must(t, err)
	_, created, err := c.Get("/epoch")
	testenv.Must(t, err)

	servers[leader].Stop()
	t.Logf("stopped ZooKeeper's leader, server %d", leader+1)
	var set *zk.Stat
	testenv.Eventually(t, 60*time.Second, "a set in ZooKeeper's next epoch", func() error {
		set, err = c.Set("/epoch", []byte("two"), -1)
		if err != nil {
			return err
		}
		if set.Mzxid>>32 <= created.Czxid>>32 {
			t.Fatalf("the set's mzxid %#x is in the epoch of the node's creation %#x", set.Mzxid, created.Czxid)
		}
		return nil
	})
	_, before, err := c.Get("/epoch")
	testenv.Must(t, err)
	zkStat := statOn(t, survivor, "/epoch")
	if before.Mzxid != set.Mzxid || *before != *zkStat {
		t.Fatalf("the node through zetcd before the cutover %+v, set %#x; on ZooKeeper %+v", before, set.Mzxid, zkStat)
	}
	last := lastZxidOf(t, survivor)
	m.WaitCaughtUp(t, last)
	// Into the next epoch: 65,536 revisions at most, less those the copy wrote meanwhile.
	if st := m.Status(t); st.Padding-loaded <= 0 || st.Padding-loaded > 1<<16 || st.UnpaddedZxid != "" {
		t.Errorf("/migrate: padding %d after the load's %d, unpadded %q; want the next epoch's", st.Padding, loaded, st.UnpaddedZxid)
	}

	// The stopped leader's cons cannot be read: force skips that check, which has nothing
	// else to find, every client but the copy's being relayed.
	code, body := m.PostCutover(t, "force=true")
	if code != http.StatusOK {
		t.Fatalf("POST /migrate/cutover: %d %s", code, body)
	}
	cs := m.Status(t).Cutover
	zkLast, err := strconv.ParseInt(cs.ZooKeeperZxid, 0, 64)
	testenv.Must(t, err)
	m.StopZooKeeper()

	var after *zk.Stat
	testenv.Eventually(t, 30*time.Second, "a read through zetcd after the cutover", func() error {
		var data []byte
		data, after, err = c.Get("/epoch")
		if err == nil && string(data) != "two" {
			t.Fatalf("/epoch after the cutover: %q", data)
		}
		return err
	})
	if after.Czxid < before.Czxid || after.Mzxid < before.Mzxid || after.Version != before.Version {
		t.Errorf("/epoch after the cutover: czxid %#x mzxid %#x version %d; before it czxid %#x mzxid %#x version %d",
			after.Czxid, after.Mzxid, after.Version, before.Czxid, before.Mzxid, before.Version)
	}
	_, loadedAfter, err := c.Get("/loaded")
	testenv.Must(t, err)
	if loadedAfter.Czxid < loadedBefore.Czxid || loadedAfter.Mzxid < loadedBefore.Mzxid {
		t.Errorf("/loaded after the cutover: czxid %#x mzxid %#x; before it %#x %#x",
			loadedAfter.Czxid, loadedAfter.Mzxid, loadedBefore.Czxid, loadedBefore.Mzxid)
	}
	written, err := c.Set("/epoch", []byte("three"), -1)
	testenv.Must(t, err)
	if written.Mzxid <= max(before.Mzxid, after.Mzxid, zkLast) {
		t.Errorf("a write after the cutover: mzxid %#x, not above %#x (before), %#x (after) and ZooKeeper's last %#x",
			written.Mzxid, before.Mzxid, after.Mzxid, zkLast)
	}
}

// statOn reads p's Stat on ZooKeeper at addr, on a session of its own.
func statOn(t *testing.T, addr, p string) *zk.Stat {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	testenv.Must(t, err)
	defer c.Close()
	_, err = c.Sync(p)
	testenv.Must(t, err)
	_, st, err := c.Get(p)
	testenv.Must(t, err)
	return st
}

// lastZxidOf is the last zxid ZooKeeper at addr reports (srvr's Zxid).
func lastZxidOf(t *testing.T, addr string) int64 {
	t.Helper()
	out, err := zkserver.FourLetterWord(addr, "srvr", 10*time.Second)
	testenv.Must(t, err)
	for _, l := range strings.Split(out, "\n") {
		if z, ok := strings.CutPrefix(l, "Zxid: "); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(z), 0, 64)
			testenv.Must(t, err)
			return v
		}
	}
	t.Fatalf("srvr on %s names no Zxid: %s", addr, out)
	return 0
}

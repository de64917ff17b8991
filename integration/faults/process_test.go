package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// startProcess runs zetcd on addr with its embedded etcd in dataDir and waits until ruok works.
func startProcess(t testing.TB, dataDir, addr string) *itest.ZetcdProcess {
	t.Helper()
	return itest.StartProcessArgs(t, addr, "--data-dir", dataDir)
}

// TestProcessKill9KeepsAcknowledgedWrites: zetcd is killed with SIGKILL in the middle of a write
// load; after a restart on the same data directory every write that was acknowledged is there.
func TestProcessKill9KeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	dataDir := t.TempDir()
	addr := itest.FreePort(t)
	p := startProcess(t, dataDir, addr)

	setup := connect(t, addr)
	if _, err := setup.Create("/load", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	setup.Close()

	// Writers create sequential nodes and set a counter node; they record what was acknowledged.
	const writers = 8
	var acked sync.Map // path -> data
	var lastSet [writers]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var total atomic.Int64
	for w := 0; w < writers; w++ {
		c := connect(t, addr)
		counter := fmt.Sprintf("/load/counter-%d", w)
		if _, err := c.Create(counter, []byte("0"), 0, openACL); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := fmt.Sprintf("w%d-%d", w, i)
				path, err := c.Create("/load/n-", []byte(data), zk.FlagSequence, openACL)
				if err != nil {
					return // the server died: anything not acknowledged may be lost
				}
				acked.Store(path, data)
				if _, err := c.Set(counter, []byte(fmt.Sprint(i)), -1); err != nil {
					return
				}
				lastSet[w].Store(int64(i))
				total.Add(1)
			}
		}()
	}
	time.Sleep(2 * time.Second)
	p.Kill()
	close(stop)
	wg.Wait()
	if total.Load() == 0 {
		t.Fatal("no write was acknowledged before the kill")
	}

	p2 := startProcess(t, dataDir, addr)
	c := connect(t, addr)
	n := itest.CheckAcknowledged(t, c, &acked, "/load/counter-", lastSet[:])
	t.Logf("%d acknowledged creates (and %d sets) all present after kill -9 and restart", n, total.Load())
	p2.Stop(t)
}

// TestProcessResumeOnAnotherZetcd: two zetcd servers on one etcd; a session opened on one is
// resumed on the other with its ephemeral node, and the first server does not expire it later.
func TestProcessResumeOnAnotherZetcd(t *testing.T) {
	cluster := startEtcd(t)
	a := startZetcdOn(t, cluster)
	b := startZetcdOn(t, cluster)

	ca := itest.DialRaw(t, a.Addr)
	sess, err := ca.Handshake(encoding.ConnectRequest{TimeOut: 4000, HasReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var cr encoding.CreateResponse
	if code := ca.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/owned", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, &cr); code != 0 {
		t.Fatal(code)
	}
	hdr, err := ca.Call(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{})
	if err != nil {
		t.Fatal(err)
	}
	ca.Close() // the client loses its server

	cb := itest.DialRaw(t, b.Addr)
	resp, err := cb.Handshake(encoding.ConnectRequest{SessionID: sess.SessionID, Passwd: sess.Passwd, TimeOut: 4000, HasReadOnly: true, LastZxidSeen: hdr.Zxid})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionID != sess.SessionID || resp.TimeOut != 4000 {
		t.Fatalf("resume on the second zetcd: %+v", resp)
	}
	// Keep the session alive on b well past the timeout a would have expired it at.
	for i := 0; i < 7; i++ {
		var ex encoding.ExistsResponse
		if code := cb.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/owned"}, &ex); code != 0 {
			t.Fatalf("after %ds on the second zetcd: exists /owned: %v", i, code)
		}
		if ex.Stat.EphemeralOwner != sess.SessionID {
			t.Fatalf("owner %v, want %v", ex.Stat.EphemeralOwner, sess.SessionID)
		}
		time.Sleep(time.Second)
	}
	// Ending it on b removes the ephemeral, seen from a.
	if hdr, err := cb.Call(encoding.OpCloseSession, nil, nil); err != nil || hdr.Err != 0 {
		t.Fatalf("closeSession: %+v %v", hdr, err)
	}
	other := itest.ConnectRaw(t, a.Addr)
	if code := other.MustCall(encoding.OpExists, &encoding.ExistsRequest{Path: "/owned"}, nil); code != encoding.ErrNoNode {
		t.Errorf("ephemeral after closeSession on the other zetcd: %v", code)
	}
}

// TestProcessKill9OrphanedSession: the zetcd serving a session is killed with SIGKILL and the
// client never comes back. Another zetcd on the same etcd ends the session at its timeout as
// ZooKeeper expires one: the ephemeral is deleted, the watch held on the other zetcd fires, and
// the parent's pzxid is the zxid of that deletion (etcd's own lease expiry would leave it
// behind, and a reconnecting client's setWatches catch-up would miss the change).
func TestProcessKill9OrphanedSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	// The owner's client goes silent, and its zetcd is killed right then or a while later: the
	// session ends no earlier than its timeout after the client's last packet, and not long
	// after (the lease's keepalive cadence and grace; etcdstore's leaseTTL).
	for _, killAfter := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run(fmt.Sprintf("killed%v", killAfter), func(t *testing.T) { killOrphanedSession(t, killAfter) })
	}
}

func killOrphanedSession(t *testing.T, killAfter time.Duration) {
	const timeout = 4 * time.Second
	cluster := startEtcd(t)
	endpoint := cluster.Etcd.Endpoint
	a := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", endpoint)
	b := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", endpoint)

	owner := itest.ConnectRawTimeout(t, a.Addr, int32(timeout/time.Millisecond))
	owner.MustCreate("/o", nil, 0)
	watcher := itest.ConnectRawTimeout(t, b.Addr, 40000)
	lastPacket := time.Now() // the owner sends its last packet, heard after this (leaveAfterEphemeral)
	owner.MustCreate("/o/e", nil, encoding.ModeEphemeral)
	// The ephemeral was created through the other zetcd: as on a ZooKeeper follower, a read
	// here sees it once this zetcd has applied it, which sync waits for. Without it the child
	// watch could be set before, and spent on, the create.
	if code := watcher.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/o"}, &encoding.SyncResponse{}); code != 0 {
		t.Fatal(code)
	}
	if code := watcher.Watch("getChildren", "/o"); code != 0 {
		t.Fatal(code)
	}
	before, _ := watcher.Stat("/o")

	waitTakenKeys(t, endpoint, 5*time.Second, 2, "two taken keys with two zetcd processes")
	time.Sleep(killAfter)
	a.Kill()
	watcher.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	hdr, body, err := watcher.ReadReply()
	if err != nil {
		t.Fatalf("no event within 30s of the kill: %v", err)
	}
	ended := time.Since(lastPacket)
	var ev encoding.WatcherEvent
	if err := encoding.DecodeRecord(body, &ev); err != nil || hdr.Xid != encoding.XidNotification {
		t.Fatalf("want a notification, got %+v (%v)", hdr, err)
	}
	if ev.Type != encoding.EventNodeChildrenChanged || ev.Path != "/o" {
		t.Fatalf("event %v %s, want NodeChildrenChanged /o", ev.Type, ev.Path)
	}
	const late = 10 * time.Second // keepalive cadence (lease TTL/3) plus grace, with room
	if ended < timeout || ended > timeout+late {
		t.Errorf("the session ended %v after its client's last packet; want between its timeout %v and %v", ended, timeout, timeout+late)
	}
	t.Logf("the session ended %v after its client's last packet (timeout %v)", ended, timeout)
	after, _ := watcher.Stat("/o")
	if after.Pzxid != hdr.Zxid || after.NumChildren != 0 || after.Cversion != before.Cversion+1 {
		t.Errorf("parent after the expiry: pzxid %d numChildren %d cversion %d; want pzxid %d (the event's zxid), 0, %d",
			after.Pzxid, after.NumChildren, after.Cversion, hdr.Zxid, before.Cversion+1)
	}
	// The killed process's taken key (etcdstore/keys.go) goes once its last session has ended;
	// the live one's stays.
	waitTakenKeys(t, endpoint, 5*time.Second, 1, "one taken key (the live zetcd's) after the killed process's last session ended")
}

// waitTakenKeys waits up to wait for the zetcd processes' taken keys under the default prefix
// to number want.
func waitTakenKeys(t *testing.T, endpoint string, wait time.Duration, want int, what string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	testenv.Eventually(t, wait, what, func() error {
		r, err := cli.Get(context.Background(), "/zk/t/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if int(r.Count) != want {
			return fmt.Errorf("%d taken keys", r.Count)
		}
		return nil
	})
}

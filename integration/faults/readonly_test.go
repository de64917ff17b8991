package faults

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// TestFaultReadOnlyMode: a zetcd with --read-only-mode over a three-member etcd whose two
// followers are frozen (SIGSTOP) or killed serves read-only sessions from its replica, as a ZooKeeper
// server with readonlymode.enabled that lost its quorum (ReadOnlyZooKeeperServer): a client
// that asks for read-only gets a session flagged read-only and reads what was there; writes,
// sync and multi get NotReadOnly at a zxid; a client that did not ask for read-only, or that
// has seen a newer zxid, is refused by closing the connection; isro answers "ro". Once the
// members are back, the read-only session's connection is closed, isro answers "rw", and a new
// session is read-write.
func TestFaultReadOnlyMode(t *testing.T) {
	for _, outage := range []string{"frozen", "killed"} {
		t.Run(outage, func(t *testing.T) { readOnlyMode(t, outage == "killed") })
	}
}

// readOnlyMode is TestFaultReadOnlyMode with the followers killed (and started again), or
// frozen (and thawed).
func readOnlyMode(t *testing.T, kill bool) {
	ms := itest.FaultCluster(t)
	z := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", itest.ClusterEndpoints(ms), "--read-only-mode")
	z.LogOnFailure(t, "zetcd")

	setup := itest.ConnectRaw(t, z.Addr)
	setup.MustCreate("/ro", []byte("there"), encoding.ModePersistent)
	seen := setup.MustCreate("/ro/child", nil, encoding.ModePersistent)
	setup.Conn.Close()
	if out, _ := itest.FourLetter(z.Addr, "isro"); out != "rw" {
		t.Fatalf("isro before the outage: %q, want rw", out)
	}

	frozen := followersOf(ms, itest.ClusterLeader(t, ms))
	for _, m := range frozen {
		if kill {
			m.Kill()
		} else {
			m.Signal(t, syscall.SIGSTOP)
		}
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, m := range frozen {
				if kill {
					restartEtcdMember(t, m)
				} else {
					m.Signal(t, syscall.SIGCONT)
				}
			}
		}
	}
	t.Cleanup(thaw)
	testenv.Eventually(t, 30*time.Second, "isro answering ro", func() error {
		if out, err := itest.FourLetter(z.Addr, "isro"); out != "ro" {
			return fmt.Errorf("isro: %q, %v", out, err)
		}
		return nil
	})

	ro := readOnlyScript(t, z.Addr, seen)
	checkReadOnlyAnswers(t, ro, seen)

	thaw()
	ro.client.Conn.SetDeadline(time.Now().Add(60 * time.Second))
	for {
		hdr, _, err := ro.client.ReadReply()
		if err != nil {
			break // the read-only session's connection closed
		}
		if hdr.Xid != encoding.XidPing && hdr.Xid != encoding.XidNotification {
			t.Fatalf("unexpected reply %+v on the read-only session", hdr)
		}
	}
	testenv.Eventually(t, 30*time.Second, "isro answering rw", func() error {
		if out, err := itest.FourLetter(z.Addr, "isro"); out != "rw" {
			return fmt.Errorf("isro: %q, %v", out, err)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "a read-write session", func() error {
		c := itest.DialRaw(t, z.Addr)
		defer c.Conn.Close()
		resp, err := c.Handshake(encoding.ConnectRequest{TimeOut: 10000, ReadOnly: true, HasReadOnly: true})
		if err != nil {
			return err
		}
		if resp.ReadOnly {
			return errors.New("the session is read-only")
		}
		hdr, err := c.Call(encoding.OpCreate, &encoding.CreateRequest{Path: "/ro/after", ACL: openACLRaw}, &encoding.CreateResponse{})
		if err != nil || hdr.Err != encoding.ErrOK {
			return fmt.Errorf("create after the outage: %v, %v", hdr.Err, err)
		}
		return nil
	})
}

// checkReadOnlyAnswers checks what a server in read-only mode answered readOnlyScript: the same
// checks for zetcd and for ZooKeeper.
func checkReadOnlyAnswers(t *testing.T, ro readOnlyAnswers, seen encoding.Zxid) {
	t.Helper()
	if !ro.readOnly || !ro.hasReadOnly {
		t.Errorf("read-only session: readOnly %v (37 bytes: %v), want a 37-byte reply with readOnly", ro.readOnly, ro.hasReadOnly)
	}
	if string(ro.data) != "there" || ro.children != 1 {
		t.Errorf("read-only session read %q and %d children, want \"there\" and 1", ro.data, ro.children)
	}
	for op, code := range ro.codes {
		if code != encoding.ErrNotReadOnly {
			t.Errorf("%s in a read-only session: %v, want NotReadOnly", op, code)
		}
		if ro.zxids[op] < seen {
			t.Errorf("%s in a read-only session: zxid %v, below the last write's %v", op, ro.zxids[op], seen)
		}
	}
	for op, code := range ro.served {
		if code != encoding.ErrOK {
			t.Errorf("%s in a read-only session: %v, want it served", op, code)
		}
	}
	if ro.mode != "Mode: read-only" {
		t.Errorf("srvr while read-only: %q, want Mode: read-only", ro.mode)
	}
	if !ro.rwRefused {
		t.Errorf("a client that did not ask for read-only got a session")
	}
	if !ro.aheadRefused {
		t.Errorf("a client that has seen a newer zxid got a read-only session")
	}
}

// TestFaultReadOnlyModeZooKeeper runs readOnlyScript against a three-node ZooKeeper 3.9 ensemble
// with readonlymode.enabled whose two other nodes are stopped, and checks its answers as
// TestFaultReadOnlyMode checks zetcd's: the same codes, read-only flag and zxids. The ensemble
// has localSessionsEnabled: without it ZooKeeper's ReadOnlyRequestProcessor refuses the
// createSession of a read-only client as a global session's, and answers its ConnectRequest
// with a bare NotReadOnly reply header, which no client can read as a ConnectResponse.
func TestFaultReadOnlyModeZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a ZooKeeper ensemble")
	}
	zks := zkserver.StartEnsemble(t, 3, zkserver.Options{
		SystemProps: map[string]string{"readonlymode.enabled": "true"},
		ConfigLines: []string{"localSessionsEnabled=true"},
	})
	addr := zks[0].Addr
	setup := itest.ConnectRaw(t, addr)
	setup.MustCreate("/ro", []byte("there"), encoding.ModePersistent)
	seen := setup.MustCreate("/ro/child", nil, encoding.ModePersistent)
	setup.Conn.Close()
	if out, _ := itest.FourLetter(addr, "isro"); out != "rw" {
		t.Fatalf("isro before the outage: %q, want rw", out)
	}
	zks[1].Stop()
	zks[2].Stop()
	testenv.Eventually(t, 60*time.Second, "isro answering ro", func() error {
		if out, err := itest.FourLetter(addr, "isro"); out != "ro" {
			return fmt.Errorf("isro: %q, %v", out, err)
		}
		return nil
	})
	checkReadOnlyAnswers(t, readOnlyScript(t, addr, seen), seen)
}

// openACLRaw is world:anyone with every permission, for raw requests.
var openACLRaw = []encoding.ACL{itest.WorldACL(encoding.PermAll)}

// readOnlyAnswers is what a server in read-only mode answered readOnlyScript.
type readOnlyAnswers struct {
	client                *itest.RawClient // the read-only session, still open
	readOnly, hasReadOnly bool             // the ConnectResponse's readOnly, and whether it was 37 bytes
	data                  []byte           // getData /ro
	children              int              // getChildren /ro
	codes                 map[string]encoding.ErrCode
	zxids                 map[string]encoding.Zxid
	served                map[string]encoding.ErrCode // the requests ReadOnlyRequestProcessor lets through
	mode                  string                      // srvr's Mode line
	rwRefused             bool                        // a handshake without readOnly got no answer
	aheadRefused          bool                        // a read-only handshake with a lastZxidSeen ahead got no answer
}

// readOnlyScript runs the read-only script against a server in read-only mode at addr, whose
// tree holds /ro ("there") and /ro/child, the latter created at zxid seen.
func readOnlyScript(t *testing.T, addr string, seen encoding.Zxid) readOnlyAnswers {
	t.Helper()
	a := readOnlyAnswers{codes: map[string]encoding.ErrCode{}, zxids: map[string]encoding.Zxid{}, served: map[string]encoding.ErrCode{}}
	c := itest.DialRaw(t, addr)
	resp, err := c.Handshake(encoding.ConnectRequest{TimeOut: 10000, LastZxidSeen: seen, ReadOnly: true, HasReadOnly: true})
	if err != nil {
		t.Fatalf("read-only handshake: %v", err)
	}
	a.client, a.readOnly, a.hasReadOnly = c, resp.ReadOnly, resp.HasReadOnly
	var data encoding.GetDataResponse
	if hdr, err := c.Call(encoding.OpGetData, &encoding.GetDataRequest{Path: "/ro"}, &data); err != nil || hdr.Err != encoding.ErrOK {
		t.Fatalf("getData in a read-only session: %v, %v", hdr.Err, err)
	}
	a.data = data.Data
	var children encoding.GetChildrenResponse
	if hdr, err := c.Call(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/ro"}, &children); err != nil || hdr.Err != encoding.ErrOK {
		t.Fatalf("getChildren in a read-only session: %v, %v", hdr.Err, err)
	}
	a.children = len(children.Children)
	refused := []struct {
		name string
		op   encoding.Op
		req  encoding.Record
	}{
		{"create", encoding.OpCreate, &encoding.CreateRequest{Path: "/ro/new", ACL: openACLRaw}},
		{"create ephemeral", encoding.OpCreate2, &encoding.CreateRequest{Path: "/ro/eph", ACL: openACLRaw, Flags: encoding.ModeEphemeral}},
		{"setData", encoding.OpSetData, &encoding.SetDataRequest{Path: "/ro", Data: []byte("x"), Version: -1}},
		{"delete", encoding.OpDelete, &encoding.DeleteRequest{Path: "/ro/child", Version: -1}},
		{"sync", encoding.OpSync, &encoding.SyncRequest{Path: "/ro"}},
		{"multi", encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/ro/m", ACL: openACLRaw}}}}},
	}
	for _, r := range refused {
		hdr, err := c.Call(r.op, r.req, nil)
		if err != nil {
			t.Fatalf("%s in a read-only session: %v", r.name, err)
		}
		a.codes[r.name], a.zxids[r.name] = hdr.Err, hdr.Zxid
	}
	served := []struct {
		name string
		op   encoding.Op
		req  encoding.Record
	}{
		{"exists", encoding.OpExists, &encoding.ExistsRequest{Path: "/ro", Watch: true}},
		{"getChildren2", encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: "/ro"}},
		{"getACL", encoding.OpGetACL, &encoding.GetACLRequest{Path: "/ro"}},
		{"setWatches", encoding.OpSetWatches, &encoding.SetWatches{RelativeZxid: seen, DataWatches: []string{"/ro"}, ExistWatches: []string{}, ChildWatches: []string{}}},
		{"multiRead", encoding.OpMultiRead, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/ro"}}}}},
		{"whoAmI", encoding.OpWhoAmI, nil},
		{"getEphemerals", encoding.OpGetEphemerals, &encoding.GetEphemeralsRequest{PrefixPath: "/"}},
		{"getAllChildrenNumber", encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: "/ro"}},
		{"addWatch", encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/ro", Mode: encoding.AddWatchPersistent}},
		{"removeWatches", encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: "/ro", Type: encoding.WatcherAny}},
	}
	for _, r := range served {
		hdr, err := c.Call(r.op, r.req, nil)
		if err != nil {
			t.Fatalf("%s in a read-only session: %v", r.name, err)
		}
		a.served[r.name] = hdr.Err
	}
	closing := itest.DialRaw(t, addr)
	if _, err := closing.Handshake(encoding.ConnectRequest{TimeOut: 10000, ReadOnly: true, HasReadOnly: true}); err != nil {
		t.Fatalf("second read-only handshake: %v", err)
	}
	hdr, err := closing.Call(encoding.OpCloseSession, nil, nil)
	if err != nil {
		t.Fatalf("closeSession of a read-only session: %v", err)
	}
	a.served["closeSession"] = hdr.Err
	srvr, _ := itest.FourLetter(addr, "srvr")
	for _, line := range strings.Split(srvr, "\n") {
		if strings.HasPrefix(line, "Mode: ") {
			a.mode = line
		}
	}
	a.rwRefused = handshakeRefused(t, addr, encoding.ConnectRequest{TimeOut: 10000, HasReadOnly: true})
	a.aheadRefused = handshakeRefused(t, addr, encoding.ConnectRequest{TimeOut: 10000, LastZxidSeen: seen + 1<<32, ReadOnly: true, HasReadOnly: true})
	return a
}

// handshakeRefused reports whether the server closed the connection without answering req.
func handshakeRefused(t *testing.T, addr string, req encoding.ConnectRequest) bool {
	c := itest.DialRaw(t, addr)
	defer c.Conn.Close()
	c.Conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Handshake(req)
	return err != nil
}

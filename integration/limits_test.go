package integration

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Requests that ZooKeeper 3.9 serves under its default jute.maxbuffer (1 MiB) are served, however
// large the etcd request they make: a multi of 10,000 creates, a node name of 500,000 characters.

func TestLimitMultiOfManyCreates(t *testing.T) {
	const n = 10000
	forEachServer(t, func(t *testing.T, addr string) {
		// The raw client does not ping while it waits for a reply, as real clients do, and the
		// multi can take longer than itest.ConnectRaw's 10 s session timeout under the race detector
		// on a 2-core machine (12 s seen): the longest timeout both servers grant keeps the
		// session alive, so the test is about the request's size and not its speed.
		c := itest.ConnectRawTimeout(t, addr, 40000)
		c.MustCreate("/many", nil, 0)
		ops := make([]encoding.MultiOp, n)
		for i := range ops {
			ops[i] = opCreate(fmt.Sprintf("/many/n%05d", i), []byte("x"), 0)
		}
		hdr, res := c.Multi(ops...)
		if hdr.Err != 0 || len(res) != n {
			t.Fatalf("multi of %d creates: %v, %d results", n, hdr.Err, len(res))
		}
		var children encoding.GetChildrenResponse
		if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/many"}, &children); code != 0 || len(children.Children) != n {
			t.Errorf("getChildren after the multi: %v, %d children, want %d", code, len(children.Children), n)
		}
	})
}

func TestLimitLongNodeName(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		path := "/" + strings.Repeat("a", 500000)
		// (A failure names the node by its length: the name itself would fill the log.)
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: []byte("long"), ACL: itest.RawOpenACL}, &encoding.CreateResponse{}); code != 0 {
			t.Fatalf("create of a %d-character name: %v", len(path), code)
		}
		var data encoding.GetDataResponse
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: path}, &data); code != 0 || string(data.Data) != "long" {
			t.Errorf("getData of the long name: %v %q", code, data.Data)
		}
		var children encoding.GetChildrenResponse
		if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/"}, &children); code != 0 || len(children.Children) != 2 {
			t.Errorf("the root's children: %v, %d of them", code, len(children.Children))
		}
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: path, Version: -1}, nil); code != 0 {
			t.Fatalf("delete of the long name: %v", code)
		}
		if c.Exists(path) {
			t.Error("the long name is still there after its delete")
		}
	})
}

// TestLimitExternalEtcd: in front of an etcd with etcd's default limits (--max-request-bytes
// 1.5 MiB, --max-txn-ops 128), the requests above, which ZooKeeper serves and such an etcd
// refuses, are answered SystemError on a connection that keeps serving its session, and the
// operator is told once per limit which etcd flag to raise.
func TestLimitExternalEtcd(t *testing.T) {
	e, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), MaxRequestBytes: 3 << 19, MaxTxnOps: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	core, logs := observer.New(zapcore.InfoLevel)
	z := testenv.StartZetcdOn(t, &testenv.Etcd{Etcd: e}, testenv.Options{Logger: zap.New(core)})
	c := itest.ConnectRawTimeout(t, z.Addr, 40000)

	// Names ZooKeeper takes (the request under jute.maxbuffer, 1 MiB) that zetcd writes in more
	// etcd bytes than 1.5 MiB: each name in its node's data key and in the multi's journal.
	longs := []encoding.MultiOp{
		opCreate("/"+strings.Repeat("a", 450000), []byte("x"), 0),
		opCreate("/"+strings.Repeat("b", 450000), []byte("x"), 0),
	}
	many := make([]encoding.MultiOp, 10000)
	for i := range many {
		many[i] = opCreate(fmt.Sprintf("/n%05d", i), []byte("x"), 0)
	}
	// Over 128 etcd operations: a data key per create, and the parent's, fence and journal keys.
	few := make([]encoding.MultiOp, 200)
	for i := range few {
		few[i] = opCreate(fmt.Sprintf("/f%03d", i), []byte("x"), 0)
	}
	for _, tc := range []struct {
		name string
		call func() encoding.ErrCode
	}{
		{"multi of two creates of 450,000-character names", func() encoding.ErrCode { hdr, _ := c.Multi(longs...); return hdr.Err }},
		{"the same again", func() encoding.ErrCode { hdr, _ := c.Multi(longs...); return hdr.Err }},
		{"multi of 10,000 creates", func() encoding.ErrCode { hdr, _ := c.Multi(many...); return hdr.Err }},
		{"multi of 200 creates", func() encoding.ErrCode { hdr, _ := c.Multi(few...); return hdr.Err }},
	} {
		if code := tc.call(); code != encoding.ErrSystemError {
			t.Errorf("%s: %v, want SystemError", tc.name, code)
		}
		// The connection and its session serve on.
		path := fmt.Sprintf("/after-%d", c.Xid)
		c.MustCreate(path, []byte("ok"), 0)
		var data encoding.GetDataResponse
		if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: path}, &data); code != 0 || string(data.Data) != "ok" {
			t.Fatalf("after the %s: getData %v %q", tc.name, code, data.Data)
		}
	}
	// A single create of a 900,000-character name is one etcd key: served, as ZooKeeper serves it.
	long := "/" + strings.Repeat("c", 900000)
	if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: long, ACL: itest.RawOpenACL}, &encoding.CreateResponse{}); code != 0 {
		t.Errorf("create of a 900,000-character name: %v", code)
	}
	if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: long, Version: -1}, nil); code != 0 {
		t.Errorf("delete of the 900,000-character name: %v", code)
	}
	var children encoding.GetChildrenResponse
	if code := c.MustCall(encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/"}, &children); code != 0 || len(children.Children) != 5 {
		t.Errorf("the root's children: %v, %d of them, want zookeeper and the four after-*: a refused request left a node behind", code, len(children.Children))
	}

	warned := map[string]int{}
	for _, ent := range logs.All() {
		if ent.Level >= zapcore.WarnLevel {
			warned[fmt.Sprint(ent.ContextMap()["fix"])]++
		}
	}
	if len(warned) != 2 {
		t.Errorf("warnings: %v, want one naming --max-request-bytes and one --max-txn-ops", warned)
	}
	for fix, n := range warned {
		if n != 1 || !strings.Contains(fix, "--max-request-bytes") && !strings.Contains(fix, "--max-txn-ops") {
			t.Errorf("warned %d times: %q", n, fix)
		}
	}
}

// TestLimitMaxClientCnxns: with maxClientCnxns 2, a third connection from the same address is
// closed as soon as it is accepted, unanswered, four-letter words included, and counted in mntr
// (zk_connection_rejected); once the two close, connections are served again, and conf reports
// the limit.
func TestLimitMaxClientCnxns(t *testing.T) {
	testenv.ForEachServerWith(t, testenv.ServerOptions{MaxClientCnxns: 2}, func(t *testing.T, addr string) {
		a, b := itest.ConnectRaw(t, addr), itest.ConnectRaw(t, addr)
		if nc, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil { // else refused already
			third := &itest.RawClient{T: t, Conn: nc, R: bufio.NewReader(nc)}
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			if resp, err := third.Handshake(encoding.ConnectRequest{TimeOut: 10000}); err == nil {
				t.Errorf("third connection: %+v, want it closed", resp)
			}
			nc.Close()
		}
		if out, _ := itest.FourLetter(addr, "ruok"); out != "" {
			t.Errorf("ruok on a third connection: %q, want it closed unanswered", out)
		}
		a.Close()
		b.Close()
		var conf string
		testenv.Eventually(t, 10*time.Second, "conf answered once the server has seen the two close", func() error {
			var err error
			if conf, err = itest.FourLetter(addr, "conf"); !strings.Contains(conf, "maxClientCnxns=") {
				return fmt.Errorf("conf: %q, %v", conf, err)
			}
			return nil
		})
		if !strings.Contains(conf, "maxClientCnxns=2\n") {
			t.Errorf("conf once the two closed: %q, want maxClientCnxns=2", conf)
		}
		mntr, _ := itest.FourLetter(addr, "mntr")
		var rejected int
		for _, line := range strings.Split(mntr, "\n") {
			if v, ok := strings.CutPrefix(line, "zk_connection_rejected\t"); ok {
				rejected, _ = strconv.Atoi(v)
			}
		}
		if rejected < 2 { // more when conf came before the server saw the two close
			t.Errorf("mntr: zk_connection_rejected %d, want at least 2:\n%s", rejected, mntr)
		}
	})
}

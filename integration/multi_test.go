package integration

import (
	"fmt"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// Multi ops, built for the raw client.
func opCreate(path string, data []byte, flags encoding.CreateMode) encoding.MultiOp {
	return encoding.MultiOp{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: path, Data: data, ACL: itest.RawOpenACL, Flags: flags}}
}

func opCreate2(path string, data []byte, flags encoding.CreateMode) encoding.MultiOp {
	return encoding.MultiOp{Op: encoding.OpCreate2, Record: &encoding.CreateRequest{Path: path, Data: data, ACL: itest.RawOpenACL, Flags: flags}}
}

func opDelete(path string, version int32) encoding.MultiOp {
	return encoding.MultiOp{Op: encoding.OpDelete, Record: &encoding.DeleteRequest{Path: path, Version: version}}
}

func opSetData(path string, data []byte, version int32) encoding.MultiOp {
	return encoding.MultiOp{Op: encoding.OpSetData, Record: &encoding.SetDataRequest{Path: path, Data: data, Version: version}}
}

func opCheck(path string, version int32) encoding.MultiOp {
	return encoding.MultiOp{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: path, Version: version}}
}

// wantErrors checks a failed multi's results: every result an error result, 0 before the
// failing op, its code, RuntimeInconsistency after it (PrepRequestProcessor).
func wantErrors(t *testing.T, hdr encoding.ReplyHeader, res []encoding.MultiResult, n, failing int, code encoding.ErrCode) {
	t.Helper()
	if hdr.Err != 0 {
		t.Fatalf("failed multi: header err %v, want 0", hdr.Err)
	}
	if len(res) != n {
		t.Fatalf("failed multi: %d results, want %d", len(res), n)
	}
	for i, r := range res {
		want := encoding.ErrOK
		switch {
		case i == failing:
			want = code
		case i > failing:
			want = encoding.ErrRuntimeInconsistency
		}
		if r.Op != encoding.OpError || r.Err != want {
			t.Errorf("result %d: %v %v, want error %v", i, r.Op, r.Err, want)
		}
	}
}

// TestMultiSuccess: every op of a multi sees the earlier ones, all share one zxid, and each
// result has ZooKeeper's type and the Stat of its node right after that op.
func TestMultiSuccess(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		z0 := c.MustCreate("/m", []byte("a"), 0)
		hdr, res := c.Multi(
			opCreate("/m/a", []byte("x"), 0),
			opCreate2("/m/b", nil, 0),
			opSetData("/m", []byte("yy"), 0),
			opCheck("/m", 1),
			opDelete("/m/a", 0),
			opCreate2("/m/c", []byte("c"), encoding.ModeEphemeral),
		)
		if hdr.Err != 0 || len(res) != 6 {
			t.Fatalf("multi: err %v, %d results", hdr.Err, len(res))
		}
		z := hdr.Zxid
		if !zxidAfter(z0, z, 1) {
			t.Errorf("multi zxid %v, want the one after %v (one zxid for the whole multi)", z, z0)
		}
		wantTypes := []encoding.Op{encoding.OpCreate, encoding.OpCreate2, encoding.OpSetData, encoding.OpCheck, encoding.OpDelete, encoding.OpCreate2}
		for i, r := range res {
			if r.Op != wantTypes[i] || r.Err != 0 {
				t.Errorf("result %d: %v %v, want %v", i, r.Op, r.Err, wantTypes[i])
			}
		}
		if cr, ok := res[0].Record.(*encoding.CreateResponse); !ok || cr.Path != "/m/a" {
			t.Errorf("create result %+v", res[0].Record)
		}
		b := res[1].Record.(*encoding.Create2Response)
		if b.Path != "/m/b" || b.Stat.Czxid != z || b.Stat.Mzxid != z || b.Stat.Pzxid != z || b.Stat.Version != 0 ||
			b.Stat.Cversion != 0 || b.Stat.DataLength != 0 || b.Stat.NumChildren != 0 || b.Stat.EphemeralOwner != 0 || b.Stat.Ctime != b.Stat.Mtime {
			t.Errorf("create2 result %+v", b)
		}
		// setData's Stat is /m right after op 2: two children created, none deleted yet.
		sd := res[2].Record.(*encoding.SetDataResponse).Stat
		if sd.Czxid != z0 || sd.Mzxid != z || sd.Pzxid != z || sd.Version != 1 || sd.Cversion != 2 || sd.NumChildren != 2 ||
			sd.DataLength != 2 || sd.Mtime != b.Stat.Ctime {
			t.Errorf("setData result %+v (create at %v, multi at %v)", sd, z0, z)
		}
		e := res[5].Record.(*encoding.Create2Response)
		if e.Stat.EphemeralOwner != c.Session.SessionID || e.Stat.Czxid != z {
			t.Errorf("ephemeral create2 result %+v", e)
		}
		st, data := c.Stat("/m")
		if string(data) != "yy" || st.Version != 1 || st.NumChildren != 2 || st.Cversion != 4 || st.Pzxid != z || st.Mzxid != z {
			t.Errorf("/m after the multi: %q %+v", data, st)
		}
		if c.Exists("/m/a") || !c.Exists("/m/b") || !c.Exists("/m/c") {
			t.Errorf("children after the multi: /m/a %v /m/b %v /m/c %v", c.Exists("/m/a"), c.Exists("/m/b"), c.Exists("/m/c"))
		}
	})
}

// TestMultiFailure: a failing op anywhere rolls back the whole multi, which is answered with
// header err 0 and the 0 / code / RuntimeInconsistency list, and still consumes a zxid.
func TestMultiFailure(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		last := c.MustCreate("/m", []byte("a"), 0)
		cases := []struct {
			name    string
			ops     []encoding.MultiOp
			failing int
			code    encoding.ErrCode
		}{
			{"first", []encoding.MultiOp{opCheck("/nope", -1), opCreate("/x", nil, 0), opSetData("/m", nil, -1)}, 0, encoding.ErrNoNode},
			{"middle", []encoding.MultiOp{opCreate("/x", nil, 0), opSetData("/m", nil, 99), opDelete("/m", -1)}, 1, encoding.ErrBadVersion},
			{"last", []encoding.MultiOp{opCreate("/x", nil, 0), opSetData("/x", []byte("1"), 0), opCreate("/x", nil, 0)}, 2, encoding.ErrNodeExists},
			{"not empty", []encoding.MultiOp{opCreate("/m/c", nil, 0), opDelete("/m", -1)}, 1, encoding.ErrNotEmpty},
			{"deleted earlier", []encoding.MultiOp{opDelete("/m", 0), opSetData("/m", nil, -1)}, 1, encoding.ErrNoNode},
			{"child of deleted", []encoding.MultiOp{opDelete("/m", -1), opCreate("/m/c", nil, 0)}, 1, encoding.ErrNoNode},
			{"ephemeral parent", []encoding.MultiOp{opCreate("/e", nil, encoding.ModeEphemeral), opCreate("/e/c", nil, 0)}, 1, encoding.ErrNoChildrenForEphemerals},
			{"bad path", []encoding.MultiOp{opCreate("/x", nil, 0), opCreate("/x/", nil, 0)}, 1, encoding.ErrBadArguments},
			{"empty acl", []encoding.MultiOp{{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/y", ACL: []encoding.ACL{}}}}, 0, encoding.ErrInvalidACL},
			{"bad acl", []encoding.MultiOp{opCreate("/x", nil, 0), {Op: encoding.OpCreate2, Record: &encoding.CreateRequest{Path: "/y", ACL: []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: "world", ID: "someone"}}}}}}, 1, encoding.ErrInvalidACL},
			{"null acl in createTTL", []encoding.MultiOp{{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: "/t", Flags: encoding.ModePersistentWithTTL, TTL: 10}}}, 0, encoding.ErrInvalidACL},
			{"system node", []encoding.MultiOp{opDelete("/zookeeper", -1)}, 0, encoding.ErrBadArguments},
			{"ttl", []encoding.MultiOp{{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: "/t", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL, TTL: 0}}}, 0, encoding.ErrBadArguments},
			{"bad flags in createTTL", []encoding.MultiOp{{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: "/t", ACL: itest.RawOpenACL, Flags: 9, TTL: 10}}}, 0, encoding.ErrBadArguments},
		}
		for _, tc := range cases {
			hdr, res := c.Multi(tc.ops...)
			wantErrors(t, hdr, res, len(tc.ops), tc.failing, tc.code)
			if !zxidAfter(last, hdr.Zxid, 1) {
				t.Errorf("%s: failed multi at zxid %v, want the one after %v (it consumes one)", tc.name, hdr.Zxid, last)
			}
			last = hdr.Zxid
			for _, p := range []string{"/x", "/m/c", "/e", "/y", "/t"} {
				if c.Exists(p) {
					t.Fatalf("%s: %s exists after a failed multi", tc.name, p)
				}
			}
			st, data := c.Stat("/m")
			if string(data) != "a" || st.Version != 0 || st.Cversion != 0 {
				t.Fatalf("%s: /m changed by a failed multi: %q %+v", tc.name, data, st)
			}
		}
	})
}

// TestMultiEmpty: an empty multi succeeds with no results and consumes a zxid; an empty
// multiRead consumes none.
func TestMultiEmpty(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		z0 := c.MustCreate("/a", nil, 0)
		hdr, res := c.Multi()
		if hdr.Err != 0 || len(res) != 0 || !zxidAfter(z0, hdr.Zxid, 1) {
			t.Errorf("empty multi: err %v, %d results, zxid %v (want the one after %v)", hdr.Err, len(res), hdr.Zxid, z0)
		}
		var mr encoding.MultiResponse
		rh, err := c.Call(encoding.OpMultiRead, &encoding.MultiRequest{}, &mr)
		if err != nil || rh.Err != 0 || len(mr.Results) != 0 {
			t.Errorf("empty multiRead: %v %v %d results", err, rh.Err, len(mr.Results))
		}
		if z := c.MustCreate("/b", nil, 0); !zxidAfter(hdr.Zxid, z, 1) {
			t.Errorf("create after the empty multiRead at zxid %v, want the one after %v", z, hdr.Zxid)
		}
	})
}

// TestMultiMarshallingErrors: a read op in a write multi, or a write op in a multiRead, fails
// the whole request with MarshallingError (and no result list); so do invalid or TTL flags on a
// create op. The write multi consumes a zxid, the multiRead does not.
func TestMultiMarshallingErrors(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		last := c.MustCreate("/a", nil, 0)
		for name, ops := range map[string][]encoding.MultiOp{
			"read op":   {opCreate("/r", nil, 0), {Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/a"}}},
			"only read": {{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/a"}}},
			"bad flags": {opCreate("/r", nil, 9)},
			"ttl flags": {opCreate2("/r", nil, encoding.ModePersistentWithTTL)},
		} {
			hdr, err := c.Call(encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, &encoding.MultiResponse{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if hdr.Err != encoding.ErrMarshallingError || !zxidAfter(last, hdr.Zxid, 1) {
				t.Errorf("%s: err %v zxid %v, want MarshallingError at the zxid after %v", name, hdr.Err, hdr.Zxid, last)
			}
			last = hdr.Zxid
			if c.Exists("/r") {
				t.Fatalf("%s: /r was created", name)
			}
		}
		// A null ACL list fails the request before ZooKeeper assigns a zxid.
		hdr, err := c.Call(encoding.OpMulti, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			opCreate("/a/x", nil, 0), {Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/r"}}}}, &encoding.MultiResponse{})
		if err != nil || hdr.Err != encoding.ErrMarshallingError || hdr.Zxid != last {
			t.Errorf("null ACL: %v %v zxid %v, want MarshallingError at %v", hdr.Err, err, hdr.Zxid, last)
		}
		hdr, err = c.Call(encoding.OpMultiRead, &encoding.MultiRequest{Ops: []encoding.MultiOp{opCreate("/r", nil, 0)}}, &encoding.MultiResponse{})
		if err != nil || hdr.Err != encoding.ErrMarshallingError {
			t.Errorf("multiRead with a create: %v %v, want MarshallingError", hdr.Err, err)
		}
		if z := c.MustCreate("/b", nil, 0); !zxidAfter(last, z, 1) {
			t.Errorf("create after the refused multiRead at zxid %v, want the one after %v", z, last)
		}
	})
}

// TestMultiCreateOpcodes: inside a multi ZooKeeper retypes create ops by their flags.
func TestMultiCreateOpcodes(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		cases := []struct {
			op    encoding.MultiOp
			want  encoding.Op
			owner bool
		}{
			{opCreate("/c0", nil, 0), encoding.OpCreate, false},
			{opCreate2("/c1", nil, 0), encoding.OpCreate2, false},
			{encoding.MultiOp{Op: encoding.OpCreateContainer, Record: &encoding.CreateRequest{Path: "/c2", ACL: itest.RawOpenACL}}, encoding.OpCreate2, false},
			{opCreate("/c3", nil, encoding.ModeContainer), encoding.OpCreate2, false},
			{encoding.MultiOp{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: "/c4", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL, TTL: 100000}}, encoding.OpCreate2, false},
			{encoding.MultiOp{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: "/c5", ACL: itest.RawOpenACL, Flags: 0, TTL: 100}}, encoding.OpCreate, false},
			{encoding.MultiOp{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: "/c6", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral, TTL: 100}}, encoding.OpCreate, true},
			{encoding.MultiOp{Op: encoding.OpCreateContainer, Record: &encoding.CreateRequest{Path: "/c7", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}}, encoding.OpCreate2, false},
		}
		for i, tc := range cases {
			hdr, res := c.Multi(tc.op)
			if hdr.Err != 0 || len(res) != 1 || res[0].Op != tc.want {
				t.Errorf("case %d: err %v results %+v, want one %v", i, hdr.Err, res, tc.want)
				continue
			}
			path := fmt.Sprintf("/c%d", i)
			st, _ := c.Stat(path)
			if (st.EphemeralOwner != 0) != tc.owner {
				t.Errorf("case %d: ephemeralOwner %x", i, st.EphemeralOwner)
			}
		}
	})
}

// TestMultiSequential: sequential creates in a multi take consecutive numbers from the
// parent's create counter, which earlier creates of the same multi advance.
func TestMultiSequential(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/q", nil, 0)
		c.MustCreate("/q/x", nil, 0)
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/q/x", Version: -1}, nil); code != 0 {
			t.Fatal(code)
		}
		hdr, res := c.Multi(
			opCreate("/q/s-", nil, encoding.ModePersistentSequential),
			opCreate("/q/plain", nil, 0),
			opCreate2("/q/s-", []byte("e"), encoding.ModeEphemeralSequential),
			opSetData("/q/s-0000000001", []byte("set"), 0),
			opDelete("/q/s-0000000003", -1),
			opCreate("/q/", nil, encoding.ModePersistentSequential),
		)
		if hdr.Err != 0 || len(res) != 6 {
			t.Fatalf("multi: %v %+v", hdr.Err, res)
		}
		if p := res[0].Record.(*encoding.CreateResponse).Path; p != "/q/s-0000000001" {
			t.Errorf("first sequential name %s, want /q/s-0000000001", p)
		}
		if p := res[2].Record.(*encoding.Create2Response).Path; p != "/q/s-0000000003" {
			t.Errorf("second sequential name %s, want /q/s-0000000003", p)
		}
		if p := res[5].Record.(*encoding.CreateResponse).Path; p != "/q/0000000004" {
			t.Errorf("third sequential name %s, want /q/0000000004", p)
		}
		st, _ := c.Stat("/q")
		// 5 creates (1 before) and 2 deletes (1 before): cversion 7, 3 children left.
		if st.Cversion != 7 || st.NumChildren != 3 || st.Pzxid != hdr.Zxid {
			t.Errorf("/q after the multi: %+v", st)
		}
		// A single sequential create carries on from the multi's counter.
		var cr encoding.CreateResponse
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/q/s-", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentSequential}, &cr); code != 0 || cr.Path != "/q/s-0000000005" {
			t.Errorf("sequential create after the multi: %v %s, want /q/s-0000000005", code, cr.Path)
		}
	})
}

// TestMultiCreateThenSetData is Kafka's broker registration: create an ephemeral node with null
// data, then setData version 0 in the same multi. The node has version 1 and its czxid is the
// multi's zxid; later versioned writes see version 1.
func TestMultiCreateThenSetData(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/brokers", nil, 0)
		c.MustCreate("/brokers/ids", nil, 0)
		hdr, res := c.Multi(
			opCreate("/brokers/ids/1", nil, encoding.ModeEphemeral),
			opSetData("/brokers/ids/1", []byte(`{"host":"h"}`), 0),
		)
		if hdr.Err != 0 || len(res) != 2 || res[0].Op != encoding.OpCreate || res[1].Op != encoding.OpSetData {
			t.Fatalf("registration multi: %v %+v", hdr.Err, res)
		}
		z := hdr.Zxid
		sd := res[1].Record.(*encoding.SetDataResponse).Stat
		if sd.Czxid != z || sd.Mzxid != z || sd.Pzxid != z || sd.Version != 1 || sd.DataLength != 12 || sd.EphemeralOwner != c.Session.SessionID {
			t.Errorf("setData result %+v at zxid %v", sd, z)
		}
		st, data := c.Stat("/brokers/ids/1")
		if st != sd || string(data) != `{"host":"h"}` {
			t.Errorf("getData after registration: %q %+v, want %+v", data, st, sd)
		}
		// Versioned single-op writes after it.
		var sr encoding.SetDataResponse
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/brokers/ids/1", Data: []byte("v2"), Version: 0}, &sr); code != encoding.ErrBadVersion {
			t.Errorf("setData version 0 after registration: %v, want BadVersion", code)
		}
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/brokers/ids/1", Data: []byte("v2"), Version: 1}, &sr); code != 0 || sr.Stat.Version != 2 || sr.Stat.Czxid != z {
			t.Errorf("setData version 1 after registration: %v %+v", code, sr.Stat)
		}
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/brokers/ids/1", Version: 1}, nil); code != encoding.ErrBadVersion {
			t.Errorf("delete version 1: %v, want BadVersion", code)
		}
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/brokers/ids/1", Version: 2}, nil); code != 0 {
			t.Errorf("delete version 2: %v", code)
		}
		// The same shape through go-zookeeper, as Kafka's Java client sends it.
		g := connect(t, addr)
		out, err := g.Multi(
			&zk.CreateRequest{Path: "/brokers/ids/2", Data: nil, Acl: openACL, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: "/brokers/ids/2", Data: []byte("b2"), Version: 0},
		)
		if err != nil || len(out) != 2 || out[1].Stat == nil || out[1].Stat.Version != 1 {
			t.Errorf("go-zookeeper registration multi: %v %+v", err, out)
		}
	})
}

// TestMultiDeleteThenCreate: a node deleted and created again in one multi is a new node: czxid
// is the multi's zxid, every version and its create counter start again at 0.
func TestMultiDeleteThenCreate(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/p", nil, 0)
		c.MustCreate("/p/d", []byte("old"), 0)
		for v := int32(0); v < 2; v++ {
			if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/p/d", Data: []byte("old"), Version: v}, &encoding.SetDataResponse{}); code != 0 {
				t.Fatal(code)
			}
		}
		c.MustCreate("/p/d/c", nil, 0)
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/p/d/c", Version: -1}, nil); code != 0 {
			t.Fatal(code)
		}
		hdr, res := c.Multi(opDelete("/p/d", 2), opCreate2("/p/d", []byte("new"), 0))
		if hdr.Err != 0 || len(res) != 2 {
			t.Fatalf("multi: %v %+v", hdr.Err, res)
		}
		z := hdr.Zxid
		cr := res[1].Record.(*encoding.Create2Response)
		want := encoding.Stat{Czxid: z, Mzxid: z, Pzxid: z, Ctime: cr.Stat.Ctime, Mtime: cr.Stat.Ctime, DataLength: 3}
		if cr.Stat != want {
			t.Errorf("create2 result %+v, want %+v", cr.Stat, want)
		}
		st, data := c.Stat("/p/d")
		if st != want || string(data) != "new" {
			t.Errorf("recreated node: %q %+v, want %+v", data, st, want)
		}
		pst, _ := c.Stat("/p")
		if pst.Cversion != 3 || pst.NumChildren != 1 || pst.Pzxid != z {
			t.Errorf("parent after delete+create: %+v", pst)
		}
		// Versions and the create counter of the new node start from 0.
		var sr encoding.SetDataResponse
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/p/d", Data: []byte("x"), Version: 0}, &sr); code != 0 || sr.Stat.Version != 1 || sr.Stat.Czxid != z {
			t.Errorf("setData version 0 on the new node: %v %+v", code, sr.Stat)
		}
		var cr2 encoding.CreateResponse
		if code := c.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/p/d/s-", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentSequential}, &cr2); code != 0 || cr2.Path != "/p/d/s-0000000000" {
			t.Errorf("first sequential child of the new node: %v %s", code, cr2.Path)
		}
		st, _ = c.Stat("/p/d")
		if st.Czxid != z || st.Cversion != 1 || st.NumChildren != 1 || st.Version != 1 {
			t.Errorf("new node after a child: %+v", st)
		}
		// Recreated again, now as an ephemeral, then deleted by version.
		hdr, res = c.Multi(opDelete("/p/d/s-0000000000", 0), opDelete("/p/d", 1), opCreate("/p/d", nil, encoding.ModeEphemeral), opSetData("/p/d", []byte("e"), 0))
		if hdr.Err != 0 || len(res) != 4 {
			t.Fatalf("second multi: %v %+v", hdr.Err, res)
		}
		st, _ = c.Stat("/p/d")
		if st.Czxid != hdr.Zxid || st.Version != 1 || st.Cversion != 0 || st.EphemeralOwner != c.Session.SessionID {
			t.Errorf("recreated ephemeral: %+v", st)
		}
		if code := c.MustCall(encoding.OpDelete, &encoding.DeleteRequest{Path: "/p/d", Version: 1}, nil); code != 0 {
			t.Errorf("delete the ephemeral at version 1: %v", code)
		}
	})
}

// TestMultiKafka: Kafka's controller writes are multis guarded by a check of /controller_epoch's
// version; a stale epoch must come back as BadVersion on the check, in the result list.
func TestMultiKafka(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		c.MustCreate("/controller_epoch", []byte("1"), 0)
		c.MustCreate("/brokers", nil, 0)
		hdr, res := c.Multi(opCheck("/controller_epoch", 0), opCreate("/brokers/topics", []byte("t"), 0))
		if hdr.Err != 0 || len(res) != 2 || res[0].Op != encoding.OpCheck || res[1].Op != encoding.OpCreate {
			t.Fatalf("fenced create: %v %+v", hdr.Err, res)
		}
		hdr, res = c.Multi(opCheck("/controller_epoch", 0), opSetData("/brokers/topics", []byte("u"), 0))
		if hdr.Err != 0 || len(res) != 2 || res[1].Record.(*encoding.SetDataResponse).Stat.Version != 1 {
			t.Fatalf("fenced setData: %v %+v", hdr.Err, res)
		}
		// A new controller bumps the epoch; the old one's writes are fenced off.
		if code := c.MustCall(encoding.OpSetData, &encoding.SetDataRequest{Path: "/controller_epoch", Data: []byte("2"), Version: 0}, &encoding.SetDataResponse{}); code != 0 {
			t.Fatal(code)
		}
		hdr, res = c.Multi(opCheck("/controller_epoch", 0), opDelete("/brokers/topics", -1))
		wantErrors(t, hdr, res, 2, 0, encoding.ErrBadVersion)
		// Controller election: create /controller and bump the epoch together.
		hdr, res = c.Multi(opCreate("/controller", []byte("c"), encoding.ModeEphemeral), opSetData("/controller_epoch", []byte("3"), 1))
		if hdr.Err != 0 || len(res) != 2 {
			t.Fatalf("election: %v %+v", hdr.Err, res)
		}
		// Losing the race: the node exists.
		hdr, res = c.Multi(opCreate("/controller", []byte("d"), encoding.ModeEphemeral), opSetData("/controller_epoch", []byte("4"), 2))
		wantErrors(t, hdr, res, 2, 0, encoding.ErrNodeExists)
		// Through go-zookeeper the failed multi surfaces as the check's error.
		g := connect(t, addr)
		_, err := g.Multi(&zk.CheckVersionRequest{Path: "/controller_epoch", Version: 0}, &zk.SetDataRequest{Path: "/brokers/topics", Data: nil, Version: -1})
		if err != zk.ErrBadVersion {
			t.Errorf("go-zookeeper fenced multi: %v, want ErrBadVersion", err)
		}
	})
}

// TestMultiRead: getData and getChildren ops answered independently, failures in place.
func TestMultiRead(t *testing.T) {
	forEachServer(t, func(t *testing.T, addr string) {
		c := itest.ConnectRaw(t, addr)
		z := c.MustCreate("/r", []byte("data"), 0)
		c.MustCreate("/r/a", nil, 0)
		c.MustCreate("/r/b", nil, 0)
		var mr encoding.MultiResponse
		hdr, err := c.Call(encoding.OpMultiRead, &encoding.MultiRequest{Ops: []encoding.MultiOp{
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/r"}},
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/nope"}},
			{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/r"}},
			{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/nope"}},
			{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/r/a", Watch: true}},
		}}, &mr)
		if err != nil || hdr.Err != 0 || len(mr.Results) != 5 {
			t.Fatalf("multiRead: %v %v %+v", err, hdr.Err, mr.Results)
		}
		gd, ok := mr.Results[0].Record.(*encoding.GetDataResponse)
		if !ok || string(gd.Data) != "data" || gd.Stat.Czxid != z || gd.Stat.NumChildren != 2 {
			t.Errorf("getData result %+v", mr.Results[0])
		}
		for _, i := range []int{1, 3} {
			if r := mr.Results[i]; r.Op != encoding.OpError || r.Err != encoding.ErrNoNode {
				t.Errorf("result %d: %v %v, want error NoNode", i, r.Op, r.Err)
			}
		}
		gc, ok := mr.Results[2].Record.(*encoding.GetChildrenResponse)
		if !ok {
			t.Fatalf("getChildren result %+v", mr.Results[2])
		}
		children := slices.Clone(gc.Children)
		slices.Sort(children)
		if !slices.Equal(children, []string{"a", "b"}) {
			t.Errorf("getChildren result %q", gc.Children)
		}
		if gd, ok := mr.Results[4].Record.(*encoding.GetDataResponse); !ok || gd.Data != nil {
			t.Errorf("getData of a null node: %+v", mr.Results[4])
		}
	})
}

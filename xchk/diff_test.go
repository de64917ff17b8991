package xchk

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/zetcd"
)

func TestZxidMapPairsByIdentityAndOrder(t *testing.T) {
	m := newZxidMap()
	steps := []struct {
		z, k encoding.Zxid
		ok   bool
	}{
		{0, 0, true},
		{0, 0x100000001, false}, // zero only with zero
		{10, 0x100000005, true},
		{10, 0x100000005, true}, // the same pair again
		{10, 0x100000006, false},
		{11, 0x100000005, false}, // k already taken
		{13, 0x100000009, true},  // gaps of any size
		{12, 0x100000007, true},  // between two known pairs, in order
		{14, 0x100000008, false}, // after 13 but before its partner
		{9, 0x100000006, false},  // before 10 but after its partner
		{5, 0x100000001, true},
	}
	for i, s := range steps {
		why := m.pair(s.z, s.k)
		if (why == "") != s.ok {
			t.Errorf("step %d: pair(%v, %v) = %q, want ok=%v", i, s.z, s.k, why, s.ok)
		}
	}
	for _, tc := range []struct{ z, k encoding.Zxid }{{0, 0}, {4, 0}, {5, 0x100000001}, {11, 0x100000005}, {13, 0x100000009}, {99, 0x100000009}} {
		if got := m.toZooKeeper(tc.z); got != tc.k {
			t.Errorf("toZooKeeper(%v) = %v, want %v", tc.z, got, tc.k)
		}
	}
	for _, tc := range []struct{ k, z encoding.Zxid }{{0x100000007, 12}, {0x100000008, 12}, {0x100000000, 0}, {0x200000000, 13}} {
		if got := m.toZetcd(tc.k); got != tc.z {
			t.Errorf("toZetcd(%v) = %v, want %v", tc.k, got, tc.z)
		}
	}
}

// TestZxidMapNewestReply: a zxid at or past the newest reply zxid the session got from zetcd
// (a read's, which pairs with nothing) stands for the newest it got from ZooKeeper.
func TestZxidMapNewestReply(t *testing.T) {
	m := newZxidMap()
	m.pair(10, 0x100000005)
	m.replied(10, 0x100000005)
	m.replied(20, 0x100000009) // a read after other sessions' writes
	for _, tc := range []struct{ z, k encoding.Zxid }{{20, 0x100000009}, {25, 0x100000009}, {15, 0x100000005}, {10, 0x100000005}} {
		if got := m.toZooKeeper(tc.z); got != tc.k {
			t.Errorf("toZooKeeper(%v) = %v, want %v", tc.z, got, tc.k)
		}
	}
}

func TestZxidMapBounded(t *testing.T) {
	m := newZxidMap()
	for i := 1; i <= maxZxidPairs+10; i++ {
		if why := m.pair(encoding.Zxid(i), encoding.Zxid(1000+i)); why != "" {
			t.Fatal(why)
		}
	}
	if len(m.pairs) > maxZxidPairs || len(m.byK) != len(m.pairs) {
		t.Fatalf("%d pairs, %d reverse entries", len(m.pairs), len(m.byK))
	}
	// A forgotten zxid is learned again, consistently with the rest.
	if why := m.pair(1, 1001); why != "" {
		t.Error(why)
	}
}

func TestOwnerMap(t *testing.T) {
	o := newOwnerMap()
	o.add(0x10, 0x7700)
	for _, tc := range []struct {
		z, k encoding.SessionID
		ok   bool
	}{{0, 0, true}, {0x10, 0x7700, true}, {0x10, 0x7701, false}, {0x11, 0x7700, false}, {0, 0x7700, false},
		{0x12, 0x7712, true}, {0x12, 0x7712, true}, {0x12, 0x7713, false}} {
		if why := o.pair(tc.z, tc.k); (why == "") != tc.ok {
			t.Errorf("pair(%v, %v) = %q, want ok=%v", tc.z, tc.k, why, tc.ok)
		}
	}
	if got := o.toZetcd(0x7700); got != 0x10 {
		t.Errorf("toZetcd = %v", got)
	}
	o.remove(0x10)
	if got := o.toZetcd(0x7700); got != 0x7700 {
		t.Errorf("toZetcd after remove = %v", got)
	}
}

func fields(diffs []difference) []string {
	var out []string
	for _, d := range diffs {
		out = append(out, d.field)
	}
	return out
}

func TestDifferFieldByField(t *testing.T) {
	stat := func(mut func(*encoding.Stat)) encoding.Stat {
		s := encoding.Stat{Czxid: 10, Mzxid: 12, Pzxid: 10, Ctime: 1, Mtime: 2, Version: 1, DataLength: 3, EphemeralOwner: 0x10}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	kstat := func(mut func(*encoding.Stat)) encoding.Stat {
		s := encoding.Stat{Czxid: 0x100000010, Mzxid: 0x100000012, Pzxid: 0x100000010, Ctime: 99, Mtime: 98, Version: 1, DataLength: 3, EphemeralOwner: 0x7700}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	cases := []struct {
		name string
		z, k encoding.Record
		want []string
	}{
		{"equal, times ignored", &encoding.GetDataResponse{Data: []byte("abc"), Stat: stat(nil)},
			&encoding.GetDataResponse{Data: []byte("abc"), Stat: kstat(nil)}, nil},
		{"null vs empty data", &encoding.GetDataResponse{Data: nil, Stat: stat(nil)},
			&encoding.GetDataResponse{Data: []byte{}, Stat: kstat(nil)}, []string{"data"}},
		{"cversion", &encoding.ExistsResponse{Stat: stat(func(s *encoding.Stat) { s.Cversion = 2 })},
			&encoding.ExistsResponse{Stat: kstat(nil)}, []string{"stat.cversion"}},
		{"mzxid not moved", &encoding.SetDataResponse{Stat: stat(func(s *encoding.Stat) { s.Mzxid = 10 })},
			&encoding.SetDataResponse{Stat: kstat(nil)}, []string{"stat.mzxid"}},
		{"owner", &encoding.ExistsResponse{Stat: stat(nil)},
			&encoding.ExistsResponse{Stat: kstat(func(s *encoding.Stat) { s.EphemeralOwner = 0x7701 })}, []string{"stat.ephemeralOwner"}},
		{"children as sets", &encoding.GetChildren2Response{Children: []string{"b", "a"}, Stat: stat(nil)},
			&encoding.GetChildren2Response{Children: []string{"a", "b"}, Stat: kstat(nil)}, nil},
		{"children differ", &encoding.GetChildrenResponse{Children: []string{"a"}},
			&encoding.GetChildrenResponse{Children: []string{"a", "b"}}, []string{"children"}},
		{"null vs empty children", &encoding.GetChildrenResponse{Children: nil},
			&encoding.GetChildrenResponse{Children: []string{}}, []string{"children"}},
		{"sequential name", &encoding.CreateResponse{Path: "/s-0000000001"},
			&encoding.CreateResponse{Path: "/s-0000000002"}, []string{"path"}},
		{"acl", &encoding.GetACLResponse{ACL: []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}, Stat: stat(nil)},
			&encoding.GetACLResponse{ACL: []encoding.ACL{{Perms: encoding.PermRead, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}, Stat: kstat(nil)},
			[]string{"acl[0].perms"}},
		{"acl length", &encoding.GetACLResponse{ACL: nil, Stat: stat(nil)},
			&encoding.GetACLResponse{ACL: []encoding.ACL{{}}, Stat: kstat(nil)}, []string{"acl.len"}},
		{"multi", &encoding.MultiResponse{Results: []encoding.MultiResult{
			{Op: encoding.OpCreate, Record: &encoding.CreateResponse{Path: "/a"}},
			{Op: encoding.OpCheck, Record: &encoding.Empty{}},
			{Op: encoding.OpSetData, Record: &encoding.SetDataResponse{Stat: stat(func(s *encoding.Stat) { s.Version = 7 })}},
			{Op: encoding.OpError, Err: encoding.ErrBadVersion},
		}}, &encoding.MultiResponse{Results: []encoding.MultiResult{
			{Op: encoding.OpCreate, Record: &encoding.CreateResponse{Path: "/a"}},
			{Op: encoding.OpCheck},
			{Op: encoding.OpSetData, Record: &encoding.SetDataResponse{Stat: kstat(nil)}},
			{Op: encoding.OpError, Err: encoding.ErrNoNode},
		}}, []string{"results[2].stat.version", "results[3].err"}},
		{"multi result type", &encoding.MultiResponse{Results: []encoding.MultiResult{{Op: encoding.OpCreate, Record: &encoding.CreateResponse{Path: "/a"}}}},
			&encoding.MultiResponse{Results: []encoding.MultiResult{{Op: encoding.OpCreate2, Record: &encoding.Create2Response{Path: "/a"}}}},
			[]string{"results[0].op"}},
		{"multi length", &encoding.MultiResponse{},
			&encoding.MultiResponse{Results: []encoding.MultiResult{{Op: encoding.OpDelete}}}, []string{"results.len"}},
		{"missing body", (*encoding.GetDataResponse)(nil), &encoding.GetDataResponse{}, []string{"body"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			owners := newOwnerMap()
			owners.add(0x10, 0x7700)
			d := &differ{zxids: newZxidMap(), owners: owners}
			d.records("", tc.z, tc.k)
			if got := fields(d.diffs); !slices.Equal(got, tc.want) {
				t.Errorf("differences %q, want %q (%+v)", got, tc.want, d.diffs)
			}
		})
	}
}

func TestDifferenceLabelDropsIndices(t *testing.T) {
	for field, want := range map[string]string{
		"stat.cversion":            "stat.cversion",
		"results[12].stat.mzxid":   "results.stat.mzxid",
		"results[0].acl[3].id.id":  "results.acl.id.id",
		"results[0].acl.len":       "results.acl.len",
		"err":                      "err",
		"clientInfo[1].authScheme": "clientInfo.authScheme",
	} {
		if got := (difference{field: field}).label(); got != want {
			t.Errorf("label(%q) = %q, want %q", field, got, want)
		}
	}
}

func TestRewriteTranslatesZxidsAndOwners(t *testing.T) {
	zx := newZxidMap()
	zx.pair(10, 0x100000010)
	owners := newOwnerMap()
	owners.add(0x10, 0x7700)
	r := &encoding.MultiResponse{Results: []encoding.MultiResult{
		{Op: encoding.OpCreate2, Record: &encoding.Create2Response{Path: "/a", Stat: encoding.Stat{Czxid: 0x100000010, EphemeralOwner: 0x7700, Ctime: 5}}},
	}}
	rewrite(r, zx.toZetcd, owners.toZetcd)
	got := r.Results[0].Record.(*encoding.Create2Response).Stat
	if got.Czxid != 10 || got.EphemeralOwner != 0x10 || got.Ctime != 5 {
		t.Errorf("rewritten stat %+v", got)
	}
}

func TestRequestPath(t *testing.T) {
	multi := &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpCheck, Record: &encoding.CheckVersionRequest{Path: "/a"}},
		{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/b"}},
	}}
	if got := zetcd.RequestPath(multi); got != "/a,/b" {
		t.Errorf("RequestPath(multi) = %q", got)
	}
	if got := pathFor("/a,/b", "results[1].path"); got != "/b" {
		t.Errorf("pathFor = %q", got)
	}
	if got := zetcd.RequestPath(&encoding.GetEphemeralsRequest{PrefixPath: "/p"}); got != "/p" {
		t.Errorf("RequestPath(getEphemerals) = %q", got)
	}
	if got := zetcd.RequestPath(&encoding.Empty{}); got != "" {
		t.Errorf("RequestPath(empty) = %q", got)
	}
}

func TestEventMatcher(t *testing.T) {
	var mu sync.Mutex
	var unpaired []string
	m := newEventMatcher(50*time.Millisecond, func(side int, ev encoding.WatcherEvent) {
		mu.Lock()
		defer mu.Unlock()
		unpaired = append(unpaired, []string{"zetcd", "zookeeper"}[side]+" "+ev.Type.String()+" "+ev.Path)
	})
	ev := func(typ encoding.EventType, path string) encoding.WatcherEvent {
		return encoding.WatcherEvent{Type: typ, State: encoding.StateSyncConnected, Path: path}
	}
	m.add(sideZetcd, ev(encoding.EventNodeCreated, "/a"))
	m.add(sideZetcd, ev(encoding.EventNodeDataChanged, "/b"))
	m.add(sideZooKeeper, ev(encoding.EventNodeDataChanged, "/b")) // pairs, out of order
	m.add(sideZooKeeper, ev(encoding.EventNodeCreated, "/a"))
	m.add(sideZooKeeper, ev(encoding.EventNodeDeleted, "/c")) // ZooKeeper only
	m.add(sideZetcd, ev(encoding.EventNodeChildrenChanged, "/d"))
	m.add(sideZooKeeper, ev(encoding.EventNodeChildrenChanged, "/e")) // same type, other path
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	got := slices.Sorted(slices.Values(unpaired))
	mu.Unlock()
	want := []string{"zetcd NodeChildrenChanged /d", "zookeeper NodeChildrenChanged /e", "zookeeper NodeDeleted /c"}
	if !slices.Equal(got, want) {
		t.Errorf("unpaired %q, want %q", got, want)
	}

	m.add(sideZetcd, ev(encoding.EventNodeCreated, "/late"))
	m.stop()
	time.Sleep(150 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(unpaired) != 3 {
		t.Errorf("after stop: %q", unpaired)
	}
}

func TestParseAnswer(t *testing.T) {
	for in, want := range map[string]Answer{"": AnswerZetcd, "zetcd": AnswerZetcd, "zookeeper": AnswerZooKeeper} {
		if got, err := ParseAnswer(in); err != nil || got != want {
			t.Errorf("ParseAnswer(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseAnswer("etcd"); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("ParseAnswer(etcd) = %v", err)
	}
}

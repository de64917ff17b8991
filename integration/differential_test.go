package integration

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// step is one request of a differential script.
type step struct {
	op   encoding.Op
	req  encoding.Record
	resp func() encoding.Record
}

func newResp[T any, P interface {
	*T
	encoding.Record
}]() func() encoding.Record {
	return func() encoding.Record { return P(new(T)) }
}

// coreScript exercises every foundation opcode, success and failure, on one session.
func coreScript() []step {
	acl := itest.RawOpenACL
	create := func(path string, data []byte, mode encoding.CreateMode) step {
		return step{encoding.OpCreate, &encoding.CreateRequest{Path: path, Data: data, ACL: acl, Flags: mode}, newResp[encoding.CreateResponse]()}
	}
	exists := func(path string) step {
		return step{encoding.OpExists, &encoding.ExistsRequest{Path: path}, newResp[encoding.ExistsResponse]()}
	}
	get := func(path string) step {
		return step{encoding.OpGetData, &encoding.GetDataRequest{Path: path}, newResp[encoding.GetDataResponse]()}
	}
	set := func(path string, data []byte, version int32) step {
		return step{encoding.OpSetData, &encoding.SetDataRequest{Path: path, Data: data, Version: version}, newResp[encoding.SetDataResponse]()}
	}
	del := func(path string, version int32) step {
		return step{encoding.OpDelete, &encoding.DeleteRequest{Path: path, Version: version}, nil}
	}
	children2 := func(path string) step {
		return step{encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: path}, newResp[encoding.GetChildren2Response]()}
	}
	return []step{
		create("/d", []byte("x"), encoding.ModePersistent),
		create("/d/a", nil, encoding.ModePersistent),
		create("/d/s-", []byte("1"), encoding.ModePersistentSequential),
		create("/d/s-", []byte{}, encoding.ModeEphemeralSequential),
		create("/d/e", []byte("eph"), encoding.ModeEphemeral),
		{encoding.OpCreate2, &encoding.CreateRequest{Path: "/d/c2", Data: []byte("c2"), ACL: acl}, newResp[encoding.Create2Response]()},
		set("/d", []byte("y"), 0),
		set("/d", []byte("z"), 5),
		set("/nope", []byte("z"), -1),
		del("/d/a", 1),
		del("/d/a", 0),
		del("/d/a", -1),
		create("/d/s-", nil, encoding.ModePersistentSequential),
		children2("/d"),
		{encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: "/d"}, newResp[encoding.GetChildrenResponse]()},
		exists("/d/e"),
		get("/d"),
		get("/d/s-0000000000"),
		get("/d/a"),
		{encoding.OpGetACL, &encoding.GetACLRequest{Path: "/d"}, newResp[encoding.GetACLResponse]()},
		{encoding.OpSetACL, &encoding.SetACLRequest{Path: "/d", ACL: []encoding.ACL{{Perms: encoding.PermRead | encoding.PermWrite | encoding.PermCreate | encoding.PermDelete | encoding.PermAdmin, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}, Version: 0}, newResp[encoding.SetACLResponse]()},
		{encoding.OpSetACL, &encoding.SetACLRequest{Path: "/d", ACL: acl, Version: 0}, newResp[encoding.SetACLResponse]()},
		create("/d", nil, encoding.ModePersistent),
		create("/d/e/x", nil, encoding.ModePersistent),
		create("/d/x//y", nil, encoding.ModePersistent),
		create("/d/x/", nil, encoding.ModePersistent),
		create("/d/", nil, encoding.ModePersistentSequential),
		del("/d", -1),
		del("/d/e", -1),
		exists("/d/e"),
		exists("/nope"),
		{encoding.OpSync, &encoding.SyncRequest{Path: "/d"}, newResp[encoding.SyncResponse]()},
		set("/d/s-0000000001", nil, -1),
		get("/d/s-0000000001"),
		children2("/"),
		exists("/"),
		get("/zookeeper"),
		children2("/zookeeper"),
		get("/zookeeper/config"),
	}
}

// scriptRun is how a script runs (run).
type scriptRun struct {
	addrs     []string // session k connects to addrs[k % len(addrs)]
	sessionOf []int    // the session of each step (nil: all on one)
	// syncFirst sends a sync before each step, on its session, and leaves the replies' zxids
	// out of the lines (the Stats' stay): for sessions on several zetcd processes, where a
	// session may read a replica behind another's write until it syncs (as on ZooKeeper's
	// followers), and a reply's zxid may be that of a revision that holds no ZooKeeper write.
	syncFirst bool
	// events adds, after the steps, one line per session with the watch events it received,
	// in order. When an event caused by another session arrives, before or after which of
	// this session's replies, is timing; their order, and that each comes before the reply
	// to this session's next sync, is not: so each session syncs before it closes and at the
	// end, and the events are compared as a sequence per session.
	events bool
}

// syncSession sends a sync on c; it fails the test unless the answer is OK.
func syncSession(t *testing.T, c *itest.RawClient, what string) {
	t.Helper()
	if code := c.MustCall(encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{}); code != 0 {
		t.Fatalf("%s: sync: %v", what, code)
	}
}

// describeEvents renders a session's events for scriptRun.events. The events of one session's
// close (closes: the zxids of closeSession replies) are sorted by path: ZooKeeper deletes a
// session's ephemerals in the order of a hash set.
func describeEvents(name string, events []itest.RawEvent, closes map[encoding.Zxid]bool) string {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b itest.RawEvent) int {
		if a.Zxid != b.Zxid || !closes[a.Zxid] {
			return 0
		}
		return strings.Compare(a.Path, b.Path)
	})
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = fmt.Sprintf("%v %v %s zxid %s", e.Type, e.State, e.Path, markZxid(e.Zxid))
	}
	return "events of " + name + ": [" + strings.Join(parts, "; ") + "]"
}

// run runs the steps, each on the session sessionOf names (nil: all on one), and renders every
// reply as one comparable line: session, error code, zxid, and the response with zxids ranked,
// times dropped, sessions named by the order they opened in (s0 the first) and child lists
// sorted. A session opens at its first step, and again at its first step after a closeSession.
//
// Zxids are rendered by rank among the zxids the transcript holds: the first reply's is +1,
// each greater one seen one more, smaller ones 0, -1, ... ZooKeeper numbers its writes one by
// one; zetcd numbers them by etcd revision and index in the revision (zxid.go), with gaps where
// a revision holds no ZooKeeper write (a zetcd process refreshing its process key). What a
// client can rely on, and what must agree, is their order and which answers share one.
func (r scriptRun) run(t *testing.T, steps []step) []string {
	clients := map[int]*itest.RawClient{}
	names := map[encoding.SessionID]string{}
	session := func(id encoding.SessionID) string {
		if name, ok := names[id]; ok {
			return name
		}
		return fmt.Sprint(id)
	}
	var out []string
	var first encoding.Zxid
	events := map[encoding.SessionID][]itest.RawEvent{} // of closed sessions, then of all
	closes := map[encoding.Zxid]bool{}                  // the zxids of closeSession replies
	for i, s := range steps {
		k := 0
		if r.sessionOf != nil {
			k = r.sessionOf[i]
		}
		c := clients[k]
		if c == nil {
			c = itest.ConnectRaw(t, r.addrs[k%len(r.addrs)])
			clients[k] = c
			names[c.Session.SessionID] = fmt.Sprintf("s%d", len(names))
		}
		if s.op == encoding.OpCloseSession {
			delete(clients, k)
		}
		if r.syncFirst || r.events && s.op == encoding.OpCloseSession {
			syncSession(t, c, fmt.Sprintf("step %d", i))
		}
		var resp encoding.Record
		if s.resp != nil {
			resp = s.resp()
		}
		// Steps a millisecond apart at least: a setData right after a create must not get
		// the same mtime as its ctime ("times" below) by chance.
		time.Sleep(2 * time.Millisecond)
		hdr, err := c.Call(s.op, s.req, resp)
		if err != nil {
			t.Fatalf("step %d (%v): %v", i, s.op, err)
		}
		if i == 0 {
			first = hdr.Zxid
		}
		line := fmt.Sprintf("%d %s %v %s -> %v", i, names[c.Session.SessionID], s.op, describeReq(s.req), hdr.Err)
		if !r.syncFirst {
			line += " zxid " + markZxid(hdr.Zxid)
		}
		out = append(out, line+describeReply(hdr, resp, session))
		if r.events && s.op == encoding.OpCloseSession {
			events[c.Session.SessionID] = c.TakeEvents()
			closes[hdr.Zxid] = true
		}
	}
	if r.events {
		for _, c := range clients {
			syncSession(t, c, "at the end")
			events[c.Session.SessionID] = c.TakeEvents()
		}
		ids := slices.Collect(maps.Keys(names))
		slices.SortFunc(ids, func(a, b encoding.SessionID) int { return strings.Compare(names[a], names[b]) })
		for _, id := range ids {
			out = append(out, describeEvents(names[id], events[id], closes))
		}
	}
	return rankZxids(out, first)
}

// markZxid marks z in a line for rankZxids to rank (0 stays 0).
func markZxid(z encoding.Zxid) string {
	if z == 0 {
		return "0"
	}
	return fmt.Sprintf("\x00%d\x00", int64(z))
}

// describeReply renders a successful reply's body (after a space), or nothing.
func describeReply(hdr encoding.ReplyHeader, resp encoding.Record, session func(encoding.SessionID) string) string {
	if hdr.Err != 0 || resp == nil {
		return ""
	}
	return " " + describeResp(resp, markZxid, session)
}

// zxidMark is how scriptRun.run marks a zxid in a line until rankZxids ranks it.
var zxidMark = regexp.MustCompile("\x00(-?[0-9]+)\x00")

// rankZxids replaces the marked zxids of lines by their rank (scriptRun.run), first being +1.
func rankZxids(lines []string, first encoding.Zxid) []string {
	seen := map[int64]bool{int64(first): true}
	for _, l := range lines {
		for _, m := range zxidMark.FindAllStringSubmatch(l, -1) {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			seen[v] = true
		}
	}
	sorted := slices.Sorted(maps.Keys(seen))
	origin, _ := slices.BinarySearch(sorted, int64(first))
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = zxidMark.ReplaceAllStringFunc(l, func(m string) string {
			v, _ := strconv.ParseInt(m[1:len(m)-1], 10, 64)
			at, _ := slices.BinarySearch(sorted, v)
			rank := at - origin + 1
			if rank > 0 {
				return fmt.Sprintf("+%d", rank)
			}
			return fmt.Sprint(rank)
		})
	}
	return out
}

func describeReq(r encoding.Record) string {
	switch r := r.(type) {
	case *encoding.CreateRequest:
		return fmt.Sprintf("%q mode %d", r.Path, r.Flags)
	case *encoding.CreateTTLRequest:
		return fmt.Sprintf("%q mode %d ttl %d", r.Path, r.Flags, r.TTL)
	case *encoding.MultiRequest:
		ops := make([]string, len(r.Ops))
		for i, o := range r.Ops {
			ops[i] = fmt.Sprintf("%v %s", o.Op, describeReq(o.Record))
		}
		return "[" + strings.Join(ops, "; ") + "]"
	default:
		return fmt.Sprintf("%+v", r)
	}
}

func describeStat(s encoding.Stat, rel func(encoding.Zxid) string, session func(encoding.SessionID) string) string {
	owner := session(s.EphemeralOwner)
	return fmt.Sprintf("{czxid %s mzxid %s pzxid %s version %d cversion %d aversion %d owner %s len %d children %d times %v}",
		rel(s.Czxid), rel(s.Mzxid), rel(s.Pzxid), s.Version, s.Cversion, s.Aversion, owner, s.DataLength, s.NumChildren,
		s.Ctime == s.Mtime)
}

func describeData(d []byte) string {
	if d == nil {
		return "null"
	}
	return fmt.Sprintf("%q", d)
}

func describeResp(r encoding.Record, rel func(encoding.Zxid) string, session func(encoding.SessionID) string) string {
	sorted := func(s []string) string {
		s = slices.Clone(s)
		slices.Sort(s)
		return strings.Join(s, ",")
	}
	switch r := r.(type) {
	case *encoding.CreateResponse:
		return r.Path
	case *encoding.Create2Response:
		return r.Path + " " + describeStat(r.Stat, rel, session)
	case *encoding.ExistsResponse:
		return describeStat(r.Stat, rel, session)
	case *encoding.GetDataResponse:
		return describeData(r.Data) + " " + describeStat(r.Stat, rel, session)
	case *encoding.SetDataResponse:
		return describeStat(r.Stat, rel, session)
	case *encoding.GetACLResponse:
		return fmt.Sprintf("%+v %s", r.ACL, describeStat(r.Stat, rel, session))
	case *encoding.SetACLResponse:
		return describeStat(r.Stat, rel, session)
	case *encoding.GetChildrenResponse:
		return "[" + sorted(r.Children) + "]"
	case *encoding.GetChildren2Response:
		return "[" + sorted(r.Children) + "] " + describeStat(r.Stat, rel, session)
	case *encoding.SyncResponse:
		return r.Path
	case *encoding.MultiResponse:
		results := make([]string, len(r.Results))
		for i, res := range r.Results {
			results[i] = fmt.Sprintf("%v %v", res.Op, res.Err)
			if res.Record != nil {
				results[i] += " " + describeResp(res.Record, rel, session)
			}
		}
		return "[" + strings.Join(results, "; ") + "]"
	case *encoding.GetAllChildrenNumberResponse:
		return fmt.Sprint(r.TotalNumber)
	case *encoding.GetEphemeralsResponse:
		return "[" + sorted(r.Ephemerals) + "]"
	}
	return fmt.Sprintf("%+v", r)
}

// compareScript runs steps against every server and requires zetcd's answers to equal
// ZooKeeper's, step by step.
func compareScript(t *testing.T, steps []step) {
	t.Helper()
	compareRuns(t, steps, scriptRun{})
}

// compareRuns is compareScript with the script run as r says (its sessions, syncs and events),
// on each server's address.
func compareRuns(t *testing.T, steps []step, r scriptRun) {
	t.Helper()
	results := map[string][]string{}
	forEachServer(t, func(t *testing.T, addr string) {
		r.addrs = []string{addr}
		results[t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]] = r.run(t, steps)
	})
	requireSameAnswers(t, results["zetcd"], results["zookeeper"])
}

// requireSameAnswers fails the test at every line of zetcd's transcript z that differs from
// ZooKeeper's zk, and then logs ZooKeeper's.
func requireSameAnswers(t *testing.T, z, zk []string) {
	t.Helper()
	if z == nil || zk == nil {
		t.Skip("needs both zetcd and ZooKeeper")
	}
	for i := range zk {
		if z[i] != zk[i] {
			t.Errorf("step %d differs:\n  zetcd:     %s\n  zookeeper: %s", i, z[i], zk[i])
		}
	}
	if t.Failed() || testing.Verbose() {
		for _, l := range zk {
			t.Log("zookeeper:", l)
		}
	}
}

// TestDifferentialCore runs one script against zetcd and ZooKeeper and requires the same answer
// to every request: error codes, data, children, and every Stat field (zxids relative to the
// script's start, times only as "ctime == mtime").
func TestDifferentialCore(t *testing.T) {
	compareScript(t, coreScript())
}

// multiScript exercises multi and the 3.5–3.9 operations: every multi shape, success and
// failure, and the single ops on nodes a multi left behind.
func multiScript() []step {
	acl := itest.RawOpenACL
	multi := func(ops ...encoding.MultiOp) step {
		return step{encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, newResp[encoding.MultiResponse]()}
	}
	multiRead := func(ops ...encoding.MultiOp) step {
		return step{encoding.OpMultiRead, &encoding.MultiRequest{Ops: ops}, newResp[encoding.MultiResponse]()}
	}
	getData := func(path string) encoding.MultiOp {
		return encoding.MultiOp{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: path}}
	}
	createTTL := func(path string, flags encoding.CreateMode, ttl int64) encoding.MultiOp {
		return encoding.MultiOp{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{Path: path, ACL: acl, Flags: flags, TTL: ttl}}
	}
	createContainer := func(path string) encoding.MultiOp {
		return encoding.MultiOp{Op: encoding.OpCreateContainer, Record: &encoding.CreateRequest{Path: path, ACL: acl, Flags: encoding.ModeContainer}}
	}
	single := func(o encoding.MultiOp, resp func() encoding.Record) step {
		return step{o.Op, o.Record, resp}
	}
	get := func(path string) step {
		return step{encoding.OpGetData, &encoding.GetDataRequest{Path: path}, newResp[encoding.GetDataResponse]()}
	}
	return []step{
		single(opCreate("/t", []byte("t"), 0), newResp[encoding.CreateResponse]()),
		multi(opCreate("/t/a", []byte("x"), 0), opCreate2("/t/b", nil, 0), opSetData("/t", []byte("y"), 0), opCheck("/t", 1)),
		multi(opCreate("/t/c", nil, 0), opCheck("/t", 5), opDelete("/t/a", -1)),
		multi(opCheck("/nope", -1)),
		multi(opCreate("/t/c", nil, 0), opCreate("/t/c", nil, 0)),
		multi(),
		multi(opCreate("/t/s-", nil, encoding.ModePersistentSequential), opCreate2("/t/s-", []byte("e"), encoding.ModeEphemeralSequential), opCreate("/t/", nil, encoding.ModePersistentSequential)),
		multi(opCreate("/t/k", nil, encoding.ModeEphemeral), opSetData("/t/k", []byte("reg"), 0)),
		single(opSetData("/t/k", []byte("v0"), 0), newResp[encoding.SetDataResponse]()),
		single(opSetData("/t/k", []byte("v2"), 1), newResp[encoding.SetDataResponse]()),
		get("/t/k"),
		multi(opSetData("/t/b", []byte("1"), -1), opSetData("/t/b", []byte("2"), -1), opSetData("/t/b", []byte("3"), 2)),
		multi(opDelete("/t/b", 3), opCreate2("/t/b", []byte("new"), 0)),
		get("/t/b"),
		single(opSetData("/t/b", nil, 0), newResp[encoding.SetDataResponse]()),
		single(opDelete("/t/b", 0), nil),
		single(opDelete("/t/b", 1), nil),
		multi(opDelete("/t/a", -1), opDelete("/t/a", -1)),
		multi(opCreate("/t/r", nil, 0), getData("/t")),
		multiRead(getData("/t"), encoding.MultiOp{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/nope"}}, getData("/t/k")),
		multi(createContainer("/t/cc"), opCreate("/t/cc/x", nil, 0), opDelete("/t/cc/x", -1)),
		multi(createTTL("/t/ttl", encoding.ModePersistentWithTTL, 100000), createTTL("/t/ttl0", encoding.ModePersistentWithTTL, 0)),
		multi(createTTL("/t/ttl", encoding.ModePersistentWithTTL, 100000), createTTL("/t/p", 0, 10), createTTL("/t/ttl-", encoding.ModePersistentSequentialWithTTL, 5)),
		single(createContainer("/t/c2"), newResp[encoding.Create2Response]()),
		single(createTTL("/t/ttl2", encoding.ModePersistentWithTTL, 100000), newResp[encoding.Create2Response]()),
		single(createTTL("/t/ttl3", 0, 100), newResp[encoding.Create2Response]()),
		multi(opDelete("/zookeeper", -1)),
		multi(opCreate("/t/s-", nil, encoding.ModePersistentSequential), opDelete("/t", -1)),
		{encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: "/t"}, newResp[encoding.GetChildren2Response]()},
		{encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: "/t"}, newResp[encoding.GetAllChildrenNumberResponse]()},
		{encoding.OpReconfig, &encoding.ReconfigRequest{CurConfigID: -1}, newResp[encoding.GetDataResponse]()},
		{encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, newResp[encoding.ExistsResponse]()},
	}
}

// TestDifferentialMulti runs multiScript against zetcd and ZooKeeper and requires the same
// answers, as TestDifferentialCore does.
func TestDifferentialMulti(t *testing.T) {
	compareScript(t, multiScript())
}

// TestDifferentialSessions runs a script of three sessions against zetcd and ZooKeeper and
// requires the same answers: a reply to a request refused without a transaction of its own (a
// multi whose create has no ACL list, an empty multiRead) carries the newest zxid, the other
// sessions' writes included, as every ZooKeeper reply does; a closed session's ephemerals go,
// and their parent's Stat shows it.
func TestDifferentialSessions(t *testing.T) {
	nullACL := encoding.MultiOp{Op: encoding.OpCreate, Record: &encoding.CreateRequest{Path: "/p/n"}}
	multi := func(ops ...encoding.MultiOp) step {
		return step{encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, newResp[encoding.MultiResponse]()}
	}
	children2 := step{encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: "/p"}, newResp[encoding.GetChildren2Response]()}
	steps := []step{
		{encoding.OpCreate, &encoding.CreateRequest{Path: "/p", ACL: itest.RawOpenACL}, newResp[encoding.CreateResponse]()},
		{encoding.OpCreate, &encoding.CreateRequest{Path: "/p/e", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeral}, newResp[encoding.CreateResponse]()},
		{encoding.OpCreate, &encoding.CreateRequest{Path: "/p/s-", ACL: itest.RawOpenACL, Flags: encoding.ModeEphemeralSequential}, newResp[encoding.CreateResponse]()},
		multi(nullACL),
		{encoding.OpMultiRead, &encoding.MultiRequest{}, newResp[encoding.MultiResponse]()},
		children2,
		{encoding.OpCloseSession, nil, nil},
		children2,
		multi(opCreate("/p/e", []byte("mine"), encoding.ModeEphemeral), opSetData("/p", []byte("x"), 0)),
		{encoding.OpGetData, &encoding.GetDataRequest{Path: "/p/e"}, newResp[encoding.GetDataResponse]()},
		multi(nullACL),
		children2,
	}
	compareRuns(t, steps, scriptRun{sessionOf: []int{0, 1, 2, 0, 0, 1, 1, 0, 2, 0, 1, 2}})
}

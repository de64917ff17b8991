package integration

import (
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Random differential scripts: seeded sequences of requests from three sessions, one request at
// a time, over a small tree, run against zetcd and ZooKeeper by compareRuns, which requires the
// same answer to every request (error code, zxid order, data, children, Stat, which session owns
// an ephemeral) and the same watch events. The scripted tests pick the cases a reader thinks of;
// these pick the interleavings nobody writes down: versions that are right or off by one, nodes
// deleted and created again, ACLs that lock a subtree, multis that mix them, sequential names
// that may or may not be taken yet, sessions that close with ephemerals under nodes others
// change, sessions that authenticate (digest) and ACLs only some of them pass. A failure names
// its seed; run other seeds with -random-first and -random-scripts, longer ones with -random-steps.

var (
	randomFirst   = flag.Int("random-first", 1, "the first seed TestDifferentialRandom and its kin run")
	randomScripts = flag.Int("random-scripts", 3, "how many seeds TestDifferentialRandom and its kin run, from -random-first")
	randomSteps   = flag.Int("random-steps", 200, "requests in each of TestDifferentialRandom's scripts")
)

// TestDifferentialRandom runs seeded random scripts (scriptGen) against zetcd and ZooKeeper and
// requires the same answers, as TestDifferentialCore does.
func TestDifferentialRandom(t *testing.T) {
	for seed := range randomSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			steps, sessionOf := randomScript(seed, *randomSteps)
			compareRuns(t, steps, scriptRun{sessionOf: sessionOf, events: true})
		})
	}
}

// TestDifferentialRandomTwoZetcds runs TestDifferentialRandom's scripts with the sessions on two
// zetcd processes over one etcd (the second session on one, the others on the other) against
// one ZooKeeper, each request after a sync on its session, and requires the same answers (the
// Stats' zxids ranked, the replies' left out: scriptRun.syncFirst) and the same watch events,
// which reach a session from the other process's writes through its own process's feed. Each
// process checks writes on its own replica; a write that the other process's changes got ahead
// of fails its guards and is checked again, once the shared fence has failed with per-znode
// guards.
func TestDifferentialRandomTwoZetcds(t *testing.T) {
	for seed := range randomSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			steps, sessionOf := randomScript(seed, *randomSteps)
			var z, zk []string
			t.Run("zetcd", func(t *testing.T) {
				e := testenv.StartEtcd(t)
				a, b := testenv.StartZetcdOn(t, e, testenv.Options{}), testenv.StartZetcdOn(t, e, testenv.Options{})
				z = scriptRun{addrs: []string{a.Addr, b.Addr}, sessionOf: sessionOf, syncFirst: true, events: true}.run(t, steps)
			})
			t.Run("zookeeper", func(t *testing.T) {
				zk = scriptRun{addrs: []string{testenv.StartZooKeeper(t)}, sessionOf: sessionOf, syncFirst: true, events: true}.run(t, steps)
			})
			requireSameAnswers(t, z, zk)
		})
	}
}

// randomSeeds yields the seeds the flags name: -random-scripts of them from -random-first.
func randomSeeds() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for i := range *randomScripts {
			if !yield(uint64(*randomFirst + i)) {
				return
			}
		}
	}
}

// randomSessions is how many sessions a random script's requests come from.
const randomSessions = 3

// randomScript returns the script of seed: a create of /r, then n random requests, and the
// session of each (half of them the first session's). Now and then a session closes; its next
// request opens a new one.
func randomScript(seed uint64, n int) (steps []step, sessionOf []int) {
	g := &scriptGen{rng: rand.New(rand.NewPCG(seed, 0x7a65746364))}
	steps = []step{{encoding.OpCreate, &encoding.CreateRequest{Path: "/r", ACL: itest.RawOpenACL}, newResp[encoding.CreateResponse]()}}
	sessionOf = []int{0}
	for range n {
		k := 0
		if g.oneIn(2) {
			k = g.rng.IntN(randomSessions)
		}
		sessionOf = append(sessionOf, k)
		if g.oneIn(40) {
			steps = append(steps, step{encoding.OpCloseSession, nil, nil})
			continue
		}
		steps = append(steps, g.step())
	}
	return steps, sessionOf
}

// scriptGen draws requests. The paths are few, so that requests meet: most name a node that
// exists at that moment, or did, or whose parent does.
type scriptGen struct {
	rng *rand.Rand
	// root, if set, replaces /r in every path: the script keeps to that subtree, and never
	// names / (concurrent scripts, randomConcurrentScript).
	root string
}

// under moves p, a path under /r, to the script's root.
func (g *scriptGen) under(p string) string {
	if g.root == "" || !strings.HasPrefix(p, "/r") {
		return p
	}
	return g.root + p[len("/r"):]
}

var (
	// randomPaths are the nodes requests name, sequential names included: whether such a
	// name is taken depends on the parent's counter when the request runs.
	randomPaths = []string{"/r", "/r/a", "/r/b", "/r/c", "/r/a/x", "/r/a/y", "/r/b/x", "/r/a/x/z",
		"/r/s-0000000000", "/r/s-0000000001", "/r/s-0000000003", "/r/a/s-0000000000", "/r/a/s-0000000002"}
	// sequentialParents are where sequential creates go.
	sequentialParents = []string{"/r", "/r/a", "/r/b"}
	// badPaths fail ZooKeeper's path validation.
	badPaths = []string{"/r/a/", "/r//a", "r", "/r/./a"}

	readOnlyACL = []encoding.ACL{itest.WorldACL(encoding.PermRead)}
	noDeleteACL = []encoding.ACL{itest.WorldACL(encoding.PermAll &^ encoding.PermDelete)}
	// aliceACL lets only a session that authenticated as alice in; authACL names whoever
	// creates the node (InvalidACL for a session that has not authenticated).
	aliceACL   = []encoding.ACL{digestACL(encoding.PermAll, "alice", "pw")}
	authACL    = []encoding.ACL{itest.ACLOf(encoding.PermAll, "auth", "")}
	readAllACL = []encoding.ACL{itest.WorldACL(encoding.PermRead), digestACL(encoding.PermAll, "alice", "pw")}
	// users are who a session may authenticate as (digest, password "pw").
	users = []string{"alice", "bob"}
)

func (g *scriptGen) oneIn(n int) bool { return g.rng.IntN(n) == 0 }

func (g *scriptGen) path() string {
	switch {
	case g.oneIn(40):
		return g.under(badPaths[g.rng.IntN(len(badPaths))])
	case g.root == "" && g.oneIn(60):
		return "/"
	}
	return g.under(randomPaths[g.rng.IntN(len(randomPaths))])
}

// version is a version to expect: any, or one of the first few a node has.
func (g *scriptGen) version() int32 { return []int32{-1, -1, 0, 0, 1, 2}[g.rng.IntN(6)] }

func (g *scriptGen) data() []byte {
	switch g.rng.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return fmt.Appendf(nil, "v%d", g.rng.IntN(100))
}

func (g *scriptGen) acl() []encoding.ACL {
	switch g.rng.IntN(40) {
	case 0:
		return readOnlyACL
	case 1, 2:
		return noDeleteACL
	case 3:
		return nil // InvalidACL
	case 4, 5:
		return aliceACL
	case 6, 7:
		return authACL
	case 8:
		return readAllACL
	}
	return itest.RawOpenACL
}

// createMode is a plain create's mode; container and TTL nodes have requests of their own.
func (g *scriptGen) createMode() encoding.CreateMode {
	return []encoding.CreateMode{encoding.ModePersistent, encoding.ModePersistent, encoding.ModePersistent,
		encoding.ModeEphemeral, encoding.ModePersistentSequential, encoding.ModeEphemeralSequential}[g.rng.IntN(6)]
}

// createPath is where a create of mode goes: a sequential create names a prefix under a parent.
func (g *scriptGen) createPath(mode encoding.CreateMode) string {
	if mode == encoding.ModePersistentSequential || mode == encoding.ModeEphemeralSequential ||
		mode == encoding.ModePersistentSequentialWithTTL {
		return g.under(sequentialParents[g.rng.IntN(len(sequentialParents))]) + "/s-"
	}
	return g.path()
}

// create is a create of any kind, as an op of a multi or alone.
func (g *scriptGen) create() encoding.MultiOp {
	switch g.rng.IntN(10) {
	case 0:
		return encoding.MultiOp{Op: encoding.OpCreateContainer, Record: &encoding.CreateRequest{
			Path: g.path(), Data: g.data(), ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}}
	case 1:
		mode := []encoding.CreateMode{encoding.ModePersistentWithTTL, encoding.ModePersistentSequentialWithTTL}[g.rng.IntN(2)]
		ttl := int64(100000) // far longer than the script: no node expires while it runs
		if g.oneIn(5) {
			ttl = 0 // BadArguments
		}
		return encoding.MultiOp{Op: encoding.OpCreateTTL, Record: &encoding.CreateTTLRequest{
			Path: g.createPath(mode), Data: g.data(), ACL: itest.RawOpenACL, Flags: mode, TTL: ttl}}
	}
	op := encoding.OpCreate
	if g.oneIn(3) {
		op = encoding.OpCreate2
	}
	mode := g.createMode()
	return encoding.MultiOp{Op: op, Record: &encoding.CreateRequest{Path: g.createPath(mode), Data: g.data(), ACL: g.acl(), Flags: mode}}
}

// writeOp is an op of a write multi.
func (g *scriptGen) writeOp() encoding.MultiOp {
	switch g.rng.IntN(8) {
	case 0, 1, 2:
		return g.create()
	case 3, 4:
		return opDelete(g.path(), g.version())
	case 5, 6:
		return opSetData(g.path(), g.data(), g.version())
	}
	return opCheck(g.path(), g.version())
}

// readOp is an op of a multiRead.
func (g *scriptGen) readOp() encoding.MultiOp {
	if g.oneIn(2) {
		return encoding.MultiOp{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: g.path()}}
	}
	return encoding.MultiOp{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: g.path()}}
}

// step draws one request, writes more often than reads: reads after writes show the state the
// writes left, and every write's answer carries a Stat or a code of its own. Some reads set
// watches, and so do addWatch requests: their events are not compared (when one reaches another
// session depends on timing), but a write of a watching session is answered only after its
// events (Session.AwaitEvents), and the watches must not change any answer.
func (g *scriptGen) step() step {
	switch g.rng.IntN(24) {
	case 0, 1, 2, 3, 4:
		c := g.create()
		if c.Op == encoding.OpCreate {
			return step{c.Op, c.Record, newResp[encoding.CreateResponse]()}
		}
		return step{c.Op, c.Record, newResp[encoding.Create2Response]()}
	case 5, 6:
		return step{encoding.OpDelete, &encoding.DeleteRequest{Path: g.path(), Version: g.version()}, nil}
	case 7, 8:
		return step{encoding.OpSetData, &encoding.SetDataRequest{Path: g.path(), Data: g.data(), Version: g.version()}, newResp[encoding.SetDataResponse]()}
	case 9, 10, 11:
		ops := make([]encoding.MultiOp, g.rng.IntN(5))
		for i := range ops {
			ops[i] = g.writeOp()
		}
		if len(ops) > 0 && g.oneIn(10) {
			ops[g.rng.IntN(len(ops))] = g.readOp() // a read in a write multi
		}
		return step{encoding.OpMulti, &encoding.MultiRequest{Ops: ops}, newResp[encoding.MultiResponse]()}
	case 12:
		ops := make([]encoding.MultiOp, 1+g.rng.IntN(3))
		for i := range ops {
			ops[i] = g.readOp()
		}
		return step{encoding.OpMultiRead, &encoding.MultiRequest{Ops: ops}, newResp[encoding.MultiResponse]()}
	case 13:
		return step{encoding.OpSetACL, &encoding.SetACLRequest{Path: g.path(), ACL: g.acl(), Version: g.version()}, newResp[encoding.SetACLResponse]()}
	case 14:
		return step{encoding.OpGetACL, &encoding.GetACLRequest{Path: g.path()}, newResp[encoding.GetACLResponse]()}
	case 15:
		return step{encoding.OpExists, &encoding.ExistsRequest{Path: g.path(), Watch: g.oneIn(3)}, newResp[encoding.ExistsResponse]()}
	case 16:
		return step{encoding.OpGetData, &encoding.GetDataRequest{Path: g.path(), Watch: g.oneIn(3)}, newResp[encoding.GetDataResponse]()}
	case 17:
		return step{encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: g.path(), Watch: g.oneIn(3)}, newResp[encoding.GetChildren2Response]()}
	case 18:
		return step{encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: g.path()}, newResp[encoding.GetAllChildrenNumberResponse]()}
	case 19:
		cred := users[g.rng.IntN(len(users))] + ":pw"
		return step{encoding.OpAuth, &encoding.AuthPacket{Scheme: "digest", Auth: []byte(cred)}, nil}
	case 20:
		mode := []encoding.AddWatchMode{encoding.AddWatchPersistent, encoding.AddWatchPersistentRecursive}[g.rng.IntN(2)]
		return step{encoding.OpAddWatch, &encoding.AddWatchRequest{Path: g.path(), Mode: mode}, newResp[encoding.ErrorResponse]()}
	case 21:
		return step{encoding.OpWhoAmI, nil, newResp[encoding.WhoAmIResponse]()}
	case 22:
		return step{encoding.OpGetEphemerals, &encoding.GetEphemeralsRequest{PrefixPath: g.under([]string{"/", "/r", "/r/a", "/r/s-"}[g.rng.IntN(4)])}, newResp[encoding.GetEphemeralsResponse]()}
	}
	return step{encoding.OpSync, &encoding.SyncRequest{Path: g.path()}, newResp[encoding.SyncResponse]()}
}

// TestDifferentialRandomConcurrent runs random scripts on eight sessions at once, each in a
// subtree of its own, against zetcd and ZooKeeper, and requires each session's answers to
// equal ZooKeeper's. On zetcd the sessions' writes meet in the committer's batches (group
// commit, etcdstore/commit.go): each write is checked on the batch's overlay after the writes
// before it, and one that fails fails alone. As nothing is shared, whatever the interleaving
// each session must get the answers it would get alone, and the watch events (only its own
// writes fire its watches) before the same replies as on ZooKeeper: an event comes before the
// reply to the write that fired it. The reply headers' zxids and the times are left out (they
// depend on the interleaving); the Stats' and events' zxids are ranked among the session's own,
// which the session's writes made in its order.
func TestDifferentialRandomConcurrent(t *testing.T) {
	const sessions = 8
	for seed := range randomSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			scripts := make([][]step, sessions)
			for k := range scripts {
				scripts[k] = randomConcurrentScript(seed*sessions+uint64(k), fmt.Sprintf("/r/%d", k), *randomSteps)
			}
			results := map[string][][]string{}
			forEachServer(t, func(t *testing.T, addr string) {
				results[t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]] = runConcurrent(t, addr, scripts)
			})
			z, zk := results["zetcd"], results["zookeeper"]
			if z == nil || zk == nil {
				t.Skip("needs both zetcd and ZooKeeper")
			}
			for k := range zk {
				for i := range zk[k] {
					if z[k][i] != zk[k][i] {
						t.Errorf("session %d, step %d differs:\n  zetcd:     %s\n  zookeeper: %s", k, i, z[k][i], zk[k][i])
					}
				}
			}
		})
	}
}

// randomConcurrentScript is a random script of one session in the subtree root: it creates
// root, then n random requests under it, none closing the session.
func randomConcurrentScript(seed uint64, root string, n int) []step {
	g := &scriptGen{rng: rand.New(rand.NewPCG(seed, 0x636f6e63)), root: root}
	steps := []step{{encoding.OpCreate, &encoding.CreateRequest{Path: root, ACL: itest.RawOpenACL}, newResp[encoding.CreateResponse]()}}
	for range n {
		steps = append(steps, g.step())
	}
	return steps
}

// runConcurrent creates /r, then runs each script on a session of its own, all at once, with
// no pause between requests, and renders each session's replies (scriptRun.run) without the
// headers' zxids and the times.
func runConcurrent(t *testing.T, addr string, scripts [][]step) [][]string {
	setup := itest.ConnectRaw(t, addr)
	if code := setup.MustCall(encoding.OpCreate, &encoding.CreateRequest{Path: "/r", ACL: itest.RawOpenACL}, &encoding.CreateResponse{}); code != 0 {
		t.Fatalf("create /r: %v", code)
	}
	clients := make([]*itest.RawClient, len(scripts))
	for k := range clients {
		clients[k] = itest.ConnectRaw(t, addr)
	}
	out := make([][]string, len(scripts))
	var wg sync.WaitGroup
	for k, steps := range scripts {
		c := clients[k]
		self := selfNamer(c)
		wg.Go(func() {
			var first encoding.Zxid
			for i, s := range steps {
				var resp encoding.Record
				if s.resp != nil {
					resp = s.resp()
				}
				hdr, err := c.Call(s.op, s.req, resp)
				if err != nil {
					t.Errorf("session %d, step %d (%v): %v", k, i, s.op, err)
					return
				}
				if i == 0 {
					first = hdr.Zxid
				}
				line := replyLine(i, s, hdr, resp, self)
				if ev := c.TakeEvents(); len(ev) > 0 {
					line += " after " + describeEvents("self", ev, nil)
				}
				out[k] = append(out[k], line)
			}
			out[k] = rankZxids(out[k], first)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// selfNamer names c's own session "self" in the Stats a line renders, any other by number.
func selfNamer(c *itest.RawClient) func(encoding.SessionID) string {
	return func(id encoding.SessionID) string {
		if id == c.Session.SessionID {
			return "self"
		}
		return fmt.Sprint(id)
	}
}

// replyLine renders the reply to step i (s) as runConcurrent and runPipelined compare it: its
// code and response, without the header's zxid and the times, which depend on the interleaving.
func replyLine(i int, s step, hdr encoding.ReplyHeader, resp encoding.Record, self func(encoding.SessionID) string) string {
	line := fmt.Sprintf("%d %v %s -> %v", i, s.op, describeReq(s.req), hdr.Err)
	return timesField.ReplaceAllString(line+describeReply(hdr, resp, self), "")
}

// timesField is describeStat's "ctime == mtime" field, which depends on the interleaving.
var timesField = regexp.MustCompile(` times (true|false)`)

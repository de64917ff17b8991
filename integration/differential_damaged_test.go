package integration

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// Damaged frames: the random scripts' requests, encoded, then some of them damaged the way a
// broken or hostile client damages a request (a byte changed, the body cut short or lengthened,
// a length or number set to -1, 0 or past the frame, the op replaced), each sent on one session
// of zetcd and one of ZooKeeper in lockstep. The framing stays right: a wrong frame length only
// closes the connection, which the server tests cover. An answer is the frames that come before
// the answer to an exists that follows the request (their xids, codes, and the size of a
// successful reply's body), or the connection closing. Each answer must be ZooKeeper's, except
// that zetcd may close the connection instead of answering a damaged request ZooKeeper refuses
// (bad input gets ZooKeeper's exact error or a closed connection). When either
// server closes its connection, both sessions end and both runs go on with new ones.

var damagedScripts = flag.Int("damaged-scripts", 3, "how many seeds TestDifferentialDamagedFrames runs, from -random-first")

// TestDifferentialDamagedFrames runs seeded scripts of requests, half of them damaged, against
// zetcd and ZooKeeper and requires the same answer to each.
func TestDifferentialDamagedFrames(t *testing.T) {
	for i := range *damagedScripts {
		seed := uint64(*randomFirst + i)
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			zkAddr := testenv.StartZooKeeper(t)
			compareDamaged(t, testenv.StartZetcd(t), zkAddr, damagedScript(seed, *randomSteps))
		})
	}
}

// compareDamaged runs script on zetcd at zAddr and ZooKeeper at zkAddr in lockstep and fails
// the test at each answer of zetcd's that is not ZooKeeper's nor an allowed close.
func compareDamaged(t *testing.T, zAddr, zkAddr string, script []damagedRequest) {
	z, zk := itest.ConnectRaw(t, zAddr), itest.ConnectRaw(t, zkAddr)
	damaged, closedInstead := 0, 0
	for i, r := range script {
		za, zOpen := z.DamagedAnswer(r.payload)
		ka, kOpen := zk.DamagedAnswer(r.payload)
		if testing.Verbose() {
			t.Logf("step %d, %s: %s", i, r.what, ka)
		}
		switch {
		case za == ka:
		case r.damaged && za == "closed" && !strings.HasPrefix(ka, "req "+encoding.ErrOK.String()):
			closedInstead++
		default:
			t.Errorf("step %d, %s:\n  zetcd:     %s\n  zookeeper: %s", i, r.what, za, ka)
		}
		if r.damaged {
			damaged++
		}
		if !zOpen || !kOpen {
			z = renewSession(t, zAddr, z)
			zk = renewSession(t, zkAddr, zk)
		}
	}
	t.Logf("%d requests, %d of them damaged; zetcd closed the connection where ZooKeeper refused otherwise %d times",
		len(script), damaged, closedInstead)
}

// renewSession ends the session of c (closing its connection first, if the server has not)
// and returns a client of a new session: a session left to expire would take its ephemeral
// nodes away at a moment the script does not choose.
func renewSession(t *testing.T, addr string, c *itest.RawClient) *itest.RawClient {
	c.Close()
	old := itest.DialRaw(t, addr)
	resp, err := old.Handshake(encoding.ConnectRequest{SessionID: c.Session.SessionID, Passwd: c.Session.Passwd, TimeOut: 10000, HasReadOnly: true})
	if err != nil {
		t.Fatalf("resume session %#x: %v", c.Session.SessionID, err)
	}
	if resp.TimeOut != 0 { // the session lives on
		if code := old.MustCall(encoding.OpCloseSession, nil, nil); code != encoding.ErrOK {
			t.Fatalf("close session %#x: %v", c.Session.SessionID, code)
		}
	}
	old.Close()
	return itest.ConnectRaw(t, addr)
}

// damagedRequest is one request as sent: its header and body (the xid left 0, runDamaged sets
// it), and what it is.
type damagedRequest struct {
	payload []byte
	what    string
	damaged bool
}

// damagedScript returns the script of seed: a create of /r, then n requests, half of them
// damaged.
func damagedScript(seed uint64, n int) []damagedRequest {
	g := &scriptGen{rng: rand.New(rand.NewPCG(seed, 0x64616d61))}
	create := &encoding.CreateRequest{Path: "/r", ACL: itest.RawOpenACL}
	script := []damagedRequest{{payload: requestPayload(encoding.OpCreate, create), what: "create /r"}}
	for range n {
		s := g.step()
		if g.oneIn(5) {
			s = g.rareStep()
		}
		r := damagedRequest{payload: requestPayload(s.op, s.req), what: fmt.Sprintf("%v %s", s.op, describeReq(s.req))}
		if g.oneIn(2) {
			keep := 0
			if s.op == encoding.OpSetWatches || s.op == encoding.OpSetWatches2 {
				keep = 8 // the relative zxid: each server compares it with zxids of its own
			}
			var how string
			r.payload, how = g.damage(r.payload, keep)
			r.what += ", " + how
			r.damaged = true
		}
		script = append(script, r)
	}
	return script
}

// rareStep draws one of the requests scriptGen.step does not: the watch requests, getChildren
// (8), reconfig, sasl, a ping, and the reaper's deleteContainer.
func (g *scriptGen) rareStep() step {
	watches := []string{g.path(), g.path()}
	switch g.rng.IntN(9) {
	case 0:
		return step{encoding.OpGetChildren, &encoding.GetChildrenRequest{Path: g.path(), Watch: g.oneIn(2)}, nil}
	case 1:
		return step{encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: g.path(), Type: encoding.WatcherType(1 + g.rng.IntN(3))}, nil}
	case 2:
		return step{encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: g.path(), Type: encoding.WatcherType(1 + g.rng.IntN(3))}, nil}
	case 3:
		return step{encoding.OpSetWatches, &encoding.SetWatches{DataWatches: watches[:1], ChildWatches: watches[1:]}, nil}
	case 4:
		return step{encoding.OpSetWatches2, &encoding.SetWatches2{ExistWatches: watches[:1], PersistentWatches: watches[1:]}, nil}
	case 5:
		return step{encoding.OpReconfig, &encoding.ReconfigRequest{NewMembers: "server.1=localhost:2888:3888;2181", CurConfigID: -1}, nil}
	case 6:
		return step{encoding.OpSasl, &encoding.GetSASLRequest{Token: []byte("token")}, nil}
	case 7:
		return step{encoding.OpPing, nil, nil}
	}
	return step{encoding.OpDeleteContainer, &encoding.DeleteContainerRequest{Path: g.path()}, nil}
}

// requestPayload encodes a request frame's header (xid 0) and body, without the length prefix.
func requestPayload(op encoding.Op, req encoding.Record) []byte {
	return itest.AppendRequest(nil, 0, op, req)[4:]
}

// damagedOps are the ops a damaged request's header may be given: every op a client may send
// but closeSession and the setWatches, the server-side ones, and numbers that are no op.
// ZooKeeper answers the requests right behind a closeSession with SessionExpired or not at all,
// as its threads happen to run. A setWatches made of another request's bytes would name a
// relative zxid neither server handed out, which each compares with zxids of its own numbering.
var damagedOps = []encoding.Op{-10, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 99, 100, 102, 103, 104, 106, 107, 108, 1000}

// damage returns a damaged copy of payload and says how it was damaged. The xid (its first four
// bytes) stays, since the answer is found by it, and so do the first keep bytes of the body.
func (g *scriptGen) damage(payload []byte, keep int) ([]byte, string) {
	p := slices.Clone(payload)
	const body = 8 // where the body begins: after the xid and the op
	from := body + keep
	n, size := len(p)-from, len(p)-body // bytes that may be damaged; the body's size
	switch k := g.rng.IntN(6); {
	case k == 0 && n > 0:
		i := from + g.rng.IntN(n)
		p[i] ^= byte(1 + g.rng.IntN(255))
		return p, fmt.Sprintf("byte %d of %d changed", i-body, size)
	case k == 1 && n > 0:
		end := from + g.rng.IntN(n)
		return p[:end], fmt.Sprintf("cut to %d of %d bytes", end-body, size)
	case k == 2 && n >= 4:
		i := from + g.rng.IntN(n-3)
		v := []int32{-1, -1, 0, 1, -2, math.MaxInt32, math.MinInt32, int32(size), int32(size + 1)}[g.rng.IntN(9)]
		binary.BigEndian.PutUint32(p[i:], uint32(v))
		return p, fmt.Sprintf("bytes %d-%d of %d set to %d", i-body, i-body+3, size, v)
	case k == 3:
		op := damagedOps[g.rng.IntN(len(damagedOps))]
		binary.BigEndian.PutUint32(p[4:], uint32(op))
		return p, fmt.Sprintf("op set to %d", op)
	case k == 4 && n > 0:
		i := from + g.rng.IntN(n)
		p[i] = []byte{2, 0x80, 0xff}[g.rng.IntN(3)]
		return p, fmt.Sprintf("byte %d of %d set to %d", i-body, size, p[i])
	}
	extra := make([]byte, 1+g.rng.IntN(12))
	for i := range extra {
		extra[i] = byte(g.rng.Uint32())
	}
	return append(p, extra...), fmt.Sprintf("%d bytes added", len(extra))
}

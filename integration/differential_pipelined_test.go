package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestDifferentialRandomPipelined runs random scripts of one session with its requests sent in
// batches of one to eight in one write, as clients pipeline them, against zetcd and ZooKeeper,
// and requires the same frames in the same order: each reply (its code and response, Stats'
// zxids ranked, times and the headers' zxids left out) and each watch event where it arrives
// among them. ZooKeeper answers a session's requests one after another, each write's events
// just before its reply; on zetcd the reads of a batch may be served from memory while its
// writes share the committer's etcd transactions, and the frames must still come in that
// order.
func TestDifferentialRandomPipelined(t *testing.T) {
	for seed := range randomSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := &scriptGen{rng: rand.New(rand.NewPCG(seed, 0x70697065))}
			steps := []step{{encoding.OpCreate, &encoding.CreateRequest{Path: "/r", ACL: itest.RawOpenACL}, newResp[encoding.CreateResponse]()}}
			for range *randomSteps {
				steps = append(steps, g.step())
			}
			results := map[string][]string{}
			batches := pipelineBatches(g, steps)
			forEachServer(t, func(t *testing.T, addr string) {
				results[t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]] = runPipelined(t, addr, steps, batches)
			})
			requireSameAnswers(t, results["zetcd"], results["zookeeper"])
		})
	}
}

// pipelineBatches splits steps into batches of one to eight. An auth is a batch of its own:
// ZooKeeper answers it as it reads it, ahead of the requests before it that it has not answered
// yet, so where its reply falls among theirs is timing.
func pipelineBatches(g *scriptGen, steps []step) []int {
	var batches []int
	for n := 0; n < len(steps); {
		size := min(1+g.rng.IntN(8), len(steps)-n)
		for i := n; i < n+size; i++ {
			if steps[i].op == encoding.OpAuth {
				size = max(i-n, 1)
				break
			}
		}
		batches = append(batches, size)
		n += size
	}
	return batches
}

// runPipelined sends steps on one session in batches of the given sizes, each batch in one
// write, reads every frame up to the last reply of the batch, and renders each frame as a line.
func runPipelined(t *testing.T, addr string, steps []step, batches []int) []string {
	c := itest.ConnectRaw(t, addr)
	self := selfNamer(c)
	var out []string
	var first encoding.Zxid
	next := 0
	for _, size := range batches {
		var frames []byte
		xids := map[encoding.Xid]int{}
		for i := next; i < next+size; i++ {
			c.Xid++
			xids[c.Xid] = i
			frames = itest.AppendRequest(frames, c.Xid, steps[i].op, steps[i].req)
		}
		if _, err := c.Conn.Write(frames); err != nil {
			t.Fatalf("write batch at step %d: %v", next, err)
		}
		for answered := 0; answered < size; {
			hdr, body, err := c.ReadReply()
			if err != nil {
				t.Fatalf("batch at step %d: read: %v", next, err)
			}
			if hdr.Xid == encoding.XidNotification {
				ev, err := itest.DecodeEvent(hdr, body)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("event %v %s zxid %s", ev.Type, ev.Path, markZxid(ev.Zxid)))
				continue
			}
			i, ok := xids[hdr.Xid]
			if !ok {
				t.Fatalf("batch at step %d: reply with xid %d", next, hdr.Xid)
			}
			s := steps[i]
			var resp encoding.Record
			if s.resp != nil && hdr.Err == encoding.ErrOK {
				resp = s.resp()
				if err := encoding.DecodeRecord(body, resp); err != nil {
					t.Fatalf("step %d: decode %v reply: %v", i, s.op, err)
				}
			}
			if i == 0 {
				first = hdr.Zxid
			}
			out = append(out, replyLine(i, s, hdr, resp, self))
			answered++
		}
		next += size
	}
	return rankZxids(out, first)
}

package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// TestDifferentialDamagedHandshakes sends ConnectRequests, most of them damaged (a byte changed,
// the body cut short or lengthened, a number set to a boundary value), to zetcd and ZooKeeper,
// each on a new connection, and requires the same answer (handshakeAnswer), or from zetcd a
// closed connection where ZooKeeper opens no session. lastZxidSeen is left as it is: each server
// compares it with zxids of its own numbering.
func TestDifferentialDamagedHandshakes(t *testing.T) {
	zkAddr := testenv.StartZooKeeper(t)
	zAddr := testenv.StartZetcd(t)
	g := &scriptGen{rng: rand.New(rand.NewPCG(uint64(*damagedScripts), 0x68616e64))}
	for i := range 20 * *damagedScripts {
		req, what := g.handshake()
		za, ka := handshakeAnswer(t, zAddr, req), handshakeAnswer(t, zkAddr, req)
		if testing.Verbose() {
			t.Logf("%d %s: %s", i, what, ka)
		}
		if za != ka && !(za == "closed" && !strings.HasPrefix(ka, "session")) {
			t.Errorf("%d %s:\n  zetcd:     %s\n  zookeeper: %s", i, what, za, ka)
		}
	}
}

// handshake draws a ConnectRequest body (without the length prefix), usually damaged, and says
// what it is.
func (g *scriptGen) handshake() ([]byte, string) {
	req := encoding.ConnectRequest{
		TimeOut:     []int32{10000, 1, 0, -5, 4000, 40000, 1 << 30}[g.rng.IntN(7)],
		Passwd:      make([]byte, 16),
		HasReadOnly: g.oneIn(2),
		ReadOnly:    g.oneIn(4),
	}
	what := fmt.Sprintf("timeout %d, readOnly byte %v %v", req.TimeOut, req.HasReadOnly, req.ReadOnly)
	if g.oneIn(4) {
		req.SessionID = encoding.SessionID(g.rng.Int64()) // no session of either server
		what += ", unknown session"
	}
	p := encoding.AppendRecord(nil, &req)
	if g.oneIn(4) {
		return p, what
	}
	// Bytes 4-11 are lastZxidSeen: left as they are.
	fields := []int{0, 12, 16, 24} // protocolVersion, timeOut, sessionId, the password's length
	switch g.rng.IntN(5) {
	case 0:
		i := []int{0, 1, 2, 3}[g.rng.IntN(4)]
		if g.oneIn(2) {
			i = 12 + g.rng.IntN(len(p)-12)
		}
		p[i] ^= byte(1 + g.rng.IntN(255))
		return p, what + fmt.Sprintf(", byte %d changed", i)
	case 1:
		n := g.rng.IntN(len(p))
		return p[:n], what + fmt.Sprintf(", cut to %d of %d bytes", n, len(p))
	case 2:
		extra := make([]byte, 1+g.rng.IntN(40))
		for i := range extra {
			extra[i] = byte(g.rng.Uint32())
		}
		return append(p, extra...), what + fmt.Sprintf(", %d bytes added", len(extra))
	case 3:
		i := fields[g.rng.IntN(len(fields))]
		v := []int32{-1, 0, 1, 15, 17, math.MaxInt32, math.MinInt32}[g.rng.IntN(7)]
		binary.BigEndian.PutUint32(p[i:], uint32(v))
		return p, what + fmt.Sprintf(", bytes %d-%d set to %d", i, i+3, v)
	}
	if len(p) == 45 {
		p[44] = []byte{2, 0x80, 0xff}[g.rng.IntN(3)]
		return p, what + fmt.Sprintf(", readOnly byte set to %d", p[44])
	}
	return p, what
}

// handshakeAnswer sends body as a ConnectRequest on a new connection to addr and describes the
// answer: "closed" when the connection closes without one; else the ConnectResponse's timeout,
// whether it names a session, its password's length and whether it has the readOnly byte, and
// then whether the session serves an exists of / ("serves") or the connection closes.
func handshakeAnswer(t *testing.T, addr string, body []byte) string {
	c := itest.DialRaw(t, addr)
	defer c.Close()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	c.Conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Conn.Write(append(frame, body...)); err != nil {
		return "closed"
	}
	resp, err := encoding.ReadFrame(c.R, nil, encoding.DefaultMaxFrameBytes)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "no answer"
	case err != nil:
		return "closed"
	}
	var cr encoding.ConnectResponse
	if err := encoding.DecodeRecord(resp, &cr); err != nil {
		return fmt.Sprintf("%d bytes that are no ConnectResponse", len(resp))
	}
	kind := "no session"
	if cr.SessionID != 0 && cr.TimeOut > 0 {
		kind = "session"
	}
	if cr.HasReadOnly {
		kind += ", readOnly byte"
	}
	out := fmt.Sprintf("%s; timeout %d, password %d bytes", kind, cr.TimeOut, len(cr.Passwd))
	hdr, err := c.Call(encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{})
	if err != nil {
		return out + "; then closed"
	}
	return out + fmt.Sprintf("; then %v", hdr.Err)
}

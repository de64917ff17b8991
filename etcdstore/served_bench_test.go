package etcdstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/zetcd"
)

// BenchmarkServedWrite measures creates and setData of 128 bytes sent by conns clients through
// real sockets to a zetcd wired as cmd/zetcd wires it on its embedded etcd (in-process client,
// fence guards, metrics): time and allocations per write of the whole process, zetcd's front,
// store and etcd together (go test -bench ServedWrite -benchmem; -cpuprofile for where the CPU
// goes). The clients encode into buffers of their own and allocate nothing per request, so
// allocs/op is the server's.
func BenchmarkServedWrite(b *testing.B) {
	for _, op := range []string{"create", "setData"} {
		for _, conns := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/conns=%d", op, conns), func(b *testing.B) { benchServedWrite(b, op, conns) })
		}
	}
}

func benchServedWrite(b *testing.B, op string, conns int) {
	addr, st := startServed(b)
	clients := make([]*rawClient, conns)
	for i := range clients {
		clients[i] = dialRaw(b, addr)
		clients[i].path = fmt.Sprintf("/s%d", i)
		if err := clients[i].create(clients[i].path); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	own0, rev0 := ownApplied(st), st.tree.revision()
	b.ReportAllocs()
	b.ResetTimer()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; next.Add(1) <= int64(b.N); n++ {
				var err error
				switch op {
				case "create":
					err = c.create(c.childPath(n))
				case "setData":
					err = c.setData(c.path)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	revs := st.tree.revision() - rev0
	b.ReportMetric(float64(b.N)/float64(revs), "writes/rev")
	b.ReportMetric(float64(ownApplied(st)-own0)/float64(revs), "own/rev")
}

// ownApplied is how many revisions the committer applied itself (own.go).
func ownApplied(st *Store) int64 {
	st.applyMu.Lock()
	defer st.applyMu.Unlock()
	return st.own.applied
}

// startServed starts an embedded etcd and a zetcd on it as cmd/zetcd does, and returns the
// address zetcd serves clients on.
func startServed(b *testing.B) (string, *Store) {
	ctx := context.Background()
	e, err := embedetcd.Start(embedetcd.Config{Dir: b.TempDir(), Compactor: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	cli, leases := e.InProcessClient()
	b.Cleanup(func() { cli.Close() })
	metrics, err := zetcd.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	st, err := New(ctx, Config{Client: cli, LeaseClient: leases, KV: WrapKV(cli.KV, metrics), Watcher: e.Watcher(),
		Logger: zap.NewNop(), ReapInterval: -1, ManagedEtcd: true, FenceGuards: true, MaxTxnOps: embedetcd.MaxTxnOps,
		Metrics: metrics})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if err := e.StartCompactor(embedetcd.CompactorConfig{Applied: st.AppliedRevision, Pressure: st.NearLimit}); err != nil {
		b.Fatal(err)
	}
	srv := zetcd.NewServer(metrics.WrapBackend(st), zetcd.Config{Logger: zap.NewNop(), Stats: st, Metrics: metrics})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), st
}

// rawClient is a ZooKeeper client of one session that sends one request at a time, encoded in
// place in buffers of its own.
type rawClient struct {
	conn net.Conn
	path string
	xid  int32
	out  []byte
	in   []byte
	name []byte // a create's path
	data []byte
}

func dialRaw(b *testing.B, addr string) *rawClient {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	c := &rawClient{conn: conn, out: make([]byte, 0, 512), in: make([]byte, 0, 512), data: make([]byte, 128)}
	req := encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})
	if _, err := conn.Write(req); err != nil {
		b.Fatal(err)
	}
	if _, err := encoding.ReadFrame(conn, c.in, 0); err != nil {
		b.Fatal(err)
	}
	return c
}

// childPath is the path of the n-th child c creates under its own node.
func (c *rawClient) childPath(n int) string {
	c.name = append(append(c.name[:0], c.path...), "/n"...)
	c.name = strconv.AppendInt(c.name, int64(n), 10)
	return unsafe.String(unsafe.SliceData(c.name), len(c.name))
}

func (c *rawClient) create(path string) error {
	c.xid++
	e := encoding.NewEncoder(c.out[:0])
	e.Int32(0)
	(&encoding.RequestHeader{Xid: encoding.Xid(c.xid), Op: encoding.OpCreate}).Encode(e)
	(&encoding.CreateRequest{Path: path, Data: c.data, ACL: openACL}).Encode(e)
	return c.call(e.Bytes())
}

func (c *rawClient) setData(path string) error {
	c.xid++
	e := encoding.NewEncoder(c.out[:0])
	e.Int32(0)
	(&encoding.RequestHeader{Xid: encoding.Xid(c.xid), Op: encoding.OpSetData}).Encode(e)
	(&encoding.SetDataRequest{Path: path, Data: c.data, Version: -1}).Encode(e)
	return c.call(e.Bytes())
}

// call sends frame (its length still 0) and reads the reply, which must be no error.
func (c *rawClient) call(frame []byte) error {
	c.out = frame
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := c.conn.Write(frame); err != nil {
		return err
	}
	c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	reply, err := encoding.ReadFrame(c.conn, c.in, 0)
	if err != nil {
		return err
	}
	if len(reply) >= 16 {
		c.in = reply[:0]
	}
	if code := int32(binary.BigEndian.Uint32(reply[12:16])); code != 0 {
		return fmt.Errorf("xid %d: error %d", c.xid, code)
	}
	return nil
}

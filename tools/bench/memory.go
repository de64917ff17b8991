package main

// The memory step: the resident memory a server needs per znode, per session and per watch.
//
// Each server (zetcd on its embedded etcd, one process; ZooKeeper, one JVM) is started fresh and
// filled in steps, with its RSS read from /proc after a forced garbage collection at the end of
// each step:
//
//	started   nothing but the system nodes
//	znodes    + memOptions.znodes persistent znodes of dataSize bytes under /mem/n
//	sessions  + sessions[0] sessions, each creating one ephemeral znode (dataSize bytes)
//	watches   + watches[0] getData watches on each of those sessions (distinct znodes)
//	scale     + sessions[1]-sessions[0] more sessions, each with one ephemeral and watches[1]
//	          getData watches
//
// The sessions are raw ZooKeeper-protocol sockets of this process, pinging every few seconds and
// reading nothing else once set up: the client side costs the servers nothing and is never in
// their RSS. zetcd is asked for a GC through /debug/pprof/heap?gc=1 (its --pprof), which also
// gives the heap profile kept with --mem-profiles; ZooKeeper through `jcmd PID GC.run`.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// memOptions configure the memory step.
type memOptions struct {
	znodes   int
	dataSize int
	// sessions are the session counts after the sessions and the scale steps; watches the
	// getData watches each session of that step sets.
	sessions [2]int
	watches  [2]int
	// profiles, if set, is a directory for zetcd's heap profile at the end of each step.
	profiles string
}

// memStep is a server's memory at the end of one step.
type memStep struct {
	Name     string `json:"name"`
	Znodes   int    `json:"znodes"`   // znodes created by the step driver so far
	Sessions int    `json:"sessions"` // sessions open
	Watches  int    `json:"watches"`  // data watches set so far
	RSSKB    int64  `json:"rssKB"`    // VmRSS after the GC
	// HeapKB is the live heap after the GC: Go's heap in use (zetcd, go_memstats_heap_inuse_bytes)
	// or the JVM's used heap (`jcmd GC.heap_info`).
	HeapKB int64 `json:"heapKB"`
	// StackKB and Goroutines are zetcd's goroutine stacks (go_memstats_stack_inuse_bytes) and
	// goroutines; 0 for ZooKeeper.
	StackKB    int64   `json:"stackKB,omitempty"`
	Goroutines int64   `json:"goroutines,omitempty"`
	Seconds    float64 `json:"seconds"` // how long the step took, GC and settling included
}

// memRun is the memory step of one server.
type memRun struct {
	Target string    `json:"target"`
	Steps  []memStep `json:"steps"`
	// GC says how the collection before each reading was forced.
	GC string `json:"gc"`
}

// memScaling is the memory step of both servers.
type memScaling struct {
	Started  time.Time `json:"started"`
	Znodes   int       `json:"znodes"`
	DataSize int       `json:"dataSize"`
	Sessions [2]int    `json:"sessions"`
	Watches  [2]int    `json:"watches"`
	Runs     []memRun  `json:"runs"`
}

// memSessionTimeout is what the step's sessions ask for; memPingEvery keeps them alive.
const (
	memSessionTimeout = 30 * time.Second
	memPingEvery      = 5 * time.Second
	memWorkers        = 64 // connections filling the tree, and sessions set up at once
	memPipeline       = 16 // requests in flight per connection while filling
	memFanout         = 1000
	memSettle         = 2 * time.Second
)

// runMemory runs the memory step against each target it applies to (zetcd, zookeeper), each
// started fresh on empty data directories of its own: the throughput runs before it leave
// their znodes behind in the shared ones.
func runMemory(shared *options) (*memScaling, error) {
	o := *shared
	o.workDir = filepath.Join(shared.workDir, "memory")
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return nil, err
	}
	ms := &memScaling{Started: time.Now().UTC(), Znodes: o.mem.znodes, DataSize: o.mem.dataSize,
		Sessions: o.mem.sessions, Watches: o.mem.watches}
	for _, name := range o.targetsOn {
		s, ok, err := startZKServer(&o, name)
		if !ok {
			continue // a bare etcd has no sessions or watches
		}
		if err != nil {
			return nil, err
		}
		log.Printf("memory: %s started (pid %d, %s)", name, s.cmd.Process.Pid, s.endpoint)
		run, err := measureMemory(&o, s)
		s.stop()
		if err != nil {
			return nil, fmt.Errorf("memory: %s: %w\n%s", name, err, s.log.String())
		}
		ms.Runs = append(ms.Runs, *run)
	}
	return ms, nil
}

func measureMemory(o *options, s *server) (*memRun, error) {
	m := o.mem
	run := &memRun{Target: s.name}
	if s.name == "zetcd" {
		run.GC = "runtime.GC() through /debug/pprof/heap?gc=1"
	} else {
		run.GC = "jcmd PID GC.run"
	}
	pool := &sessionPool{}
	defer pool.closeAll()
	go pool.pingLoop()

	var znodes, watches int
	step := func(name string, fill func() error) error {
		t0 := time.Now()
		if err := fill(); err != nil {
			return fmt.Errorf("step %s: %w", name, err)
		}
		st := memStep{Name: name, Znodes: znodes, Sessions: pool.len(), Watches: watches}
		if err := collect(o, s, &st); err != nil {
			return fmt.Errorf("step %s: gc: %w", name, err)
		}
		st.RSSKB = readMemory(s.cmd.Process.Pid).EndRSSKB
		st.Seconds = time.Since(t0).Seconds()
		run.Steps = append(run.Steps, st)
		extra := ""
		if st.Goroutines > 0 {
			extra = fmt.Sprintf(", stacks %s, %d goroutines", mib(st.StackKB), st.Goroutines)
		}
		log.Printf("memory: %-9s %-8s znodes %6d sessions %5d watches %7d: RSS %s, heap %s%s (%.0fs)",
			s.name, name, st.Znodes, st.Sessions, st.Watches, mib(st.RSSKB), mib(st.HeapKB), extra, st.Seconds)
		return nil
	}
	data := make([]byte, m.dataSize)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	if err := step("started", func() error {
		// The parents, from one session that is closed again.
		c, err := dialSession(s.endpoint)
		if err != nil {
			return err
		}
		defer c.close()
		for _, p := range []string{"/mem", "/mem/n", "/mem/e"} {
			if err := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: p, ACL: openACL}); err != nil {
				return fmt.Errorf("create %s: %w", p, err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := step("znodes", func() error {
		// The parents first (not counted: one per memFanout znodes), from one session.
		c, err := dialSession(s.endpoint)
		if err != nil {
			return err
		}
		err = c.pipeline(0, (m.znodes+memFanout-1)/memFanout, memPipeline, func(p int) (encoding.Op, encoding.Record) {
			return encoding.OpCreate, &encoding.CreateRequest{Path: parentPath(p * memFanout), ACL: openACL}
		})
		c.close()
		if err != nil {
			return err
		}
		// The loaders wait for replies longer than a session timeout: they ping too.
		loaders := &sessionPool{}
		defer loaders.closeAll()
		go loaders.pingLoop()
		err = parallel(memWorkers, m.znodes, func(w int, from, to int) error {
			c, err := dialSession(s.endpoint)
			if err != nil {
				return err
			}
			loaders.add(c)
			return c.pipeline(from, to, memPipeline, func(i int) (encoding.Op, encoding.Record) {
				return encoding.OpCreate, &encoding.CreateRequest{Path: znodePath(i), Data: data, ACL: openACL}
			})
		})
		znodes = m.znodes
		return err
	}); err != nil {
		return nil, err
	}
	// openSessions opens sessions [from, to), each creating its ephemeral znode.
	openSessions := func(from, to int) error {
		return parallel(memWorkers, to-from, func(_ int, a, b int) error {
			for i := from + a; i < from+b; i++ {
				c, err := dialSession(s.endpoint)
				if err != nil {
					return fmt.Errorf("session %d: %w", i, err)
				}
				pool.add(c)
				if err := c.call(encoding.OpCreate, &encoding.CreateRequest{Path: fmt.Sprintf("/mem/e/%07d", i),
					Data: data, ACL: openACL, Flags: encoding.ModeEphemeral}); err != nil {
					return fmt.Errorf("session %d: ephemeral: %w", i, err)
				}
			}
			return nil
		})
	}
	// setWatches sets watches getData watches on each of the sessions [from, to): the k-th of
	// them watches znodes (from+k)*watches and on, modulo the tree, so all distinct at first.
	setWatches := func(from, to, watches int) error {
		conns := pool.slice(from, to)
		return parallel(memWorkers, len(conns), func(_ int, a, b int) error {
			for k := a; k < b; k++ {
				i := from + k
				if err := conns[k].pipeline(0, watches, memPipeline, func(j int) (encoding.Op, encoding.Record) {
					return encoding.OpGetData, &encoding.GetDataRequest{Path: znodePath((i*watches + j) % m.znodes), Watch: true}
				}); err != nil {
					return fmt.Errorf("session %d: watches: %w", i, err)
				}
			}
			return nil
		})
	}
	if err := step("sessions", func() error { return openSessions(0, m.sessions[0]) }); err != nil {
		return nil, err
	}
	if err := step("watches", func() error {
		err := setWatches(0, m.sessions[0], m.watches[0])
		watches = m.sessions[0] * m.watches[0]
		return err
	}); err != nil {
		return nil, err
	}
	if m.sessions[1] > m.sessions[0] {
		if err := step("scale", func() error {
			if err := openSessions(m.sessions[0], m.sessions[1]); err != nil {
				return err
			}
			err := setWatches(m.sessions[0], m.sessions[1], m.watches[1])
			watches += (m.sessions[1] - m.sessions[0]) * m.watches[1]
			return err
		}); err != nil {
			return nil, err
		}
	}
	return run, nil
}

var openACL = []encoding.ACL{{Perms: encoding.PermAll, ID: encoding.ID{Scheme: "world", ID: "anyone"}}}

// znodePath names the i-th znode: memFanout children per parent, so that concurrent creates
// seldom share a parent (whose cversion and pzxid every create of a child rewrites).
func znodePath(i int) string { return fmt.Sprintf("%s/%04d", parentPath(i), i%memFanout) }

func parentPath(i int) string { return fmt.Sprintf("/mem/n/%04d", i/memFanout) }

// parallel splits [0, n) into workers contiguous ranges and runs f on each at once.
func parallel(workers, n int, f func(w, from, to int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		from, to := n*w/workers, n*(w+1)/workers
		if from == to {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = f(w, from, to)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// collect forces a garbage collection in the server, lets it settle, and fills in st's heap
// (and for zetcd its stacks and goroutines). For zetcd it keeps the heap and goroutine profiles
// under --mem-profiles.
func collect(o *options, s *server, st *memStep) error {
	if s.name == "zetcd" {
		base := strings.TrimSuffix(s.metrics, "/metrics")
		get := func(path, file string) error {
			resp, err := http.Get(base + path)
			if err != nil {
				return err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", path, resp.Status)
			}
			if o.mem.profiles == "" {
				return nil
			}
			if err := os.MkdirAll(o.mem.profiles, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(o.mem.profiles, fmt.Sprintf("zetcd-%s-%s", st.Name, file)), body, 0o644)
		}
		if err := get("/debug/pprof/heap?gc=1", "heap.pb.gz"); err != nil {
			return err
		}
		time.Sleep(memSettle)
		if o.mem.profiles != "" {
			if err := get("/debug/pprof/goroutine?debug=1", "goroutines.txt"); err != nil {
				return err
			}
		}
		metrics, err := scrape(s.metrics)
		if err != nil {
			return err
		}
		st.HeapKB = int64(metrics["go_memstats_heap_inuse_bytes"]) / 1024
		st.StackKB = int64(metrics["go_memstats_stack_inuse_bytes"]) / 1024
		st.Goroutines = int64(metrics["go_goroutines"])
		return nil
	}
	pid := strconv.Itoa(s.cmd.Process.Pid)
	if out, err := exec.Command("jcmd", pid, "GC.run").CombinedOutput(); err != nil {
		return fmt.Errorf("jcmd GC.run: %v: %s", err, out)
	}
	time.Sleep(memSettle)
	out, err := exec.Command("jcmd", pid, "GC.heap_info").CombinedOutput()
	if err != nil {
		return fmt.Errorf("jcmd GC.heap_info: %v: %s", err, out)
	}
	m := heapUsed.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("jcmd GC.heap_info: no used heap in %q", out)
	}
	st.HeapKB, _ = strconv.ParseInt(string(m[1]), 10, 64)
	return nil
}

// heapUsed finds the used heap in `jcmd PID GC.heap_info`: " garbage-first heap   total
// 262144K, used 21370K [...".
var heapUsed = regexp.MustCompile(`heap\s+total \d+K, used (\d+)K`)

// rawSession is one ZooKeeper session over a raw socket: the bench's client side, kept small so
// that 10,000 of them fit in this process. mu serializes writes (requests and the pinger's pings).
type rawSession struct {
	mu  sync.Mutex
	nc  net.Conn
	br  *bufio.Reader
	xid int32
	buf []byte
}

func dialSession(addr string) (*rawSession, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c := &rawSession{nc: nc, br: bufio.NewReaderSize(nc, 512)}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	req := &encoding.ConnectRequest{TimeOut: int32(memSessionTimeout / time.Millisecond), Passwd: make([]byte, 16), HasReadOnly: true}
	if _, err := encoding.WriteFrame(nc, nil, req); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	frame, err := encoding.ReadFrame(c.br, nil, 0)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	var resp encoding.ConnectResponse
	if err := encoding.DecodeRecord(frame, &resp); err != nil || resp.TimeOut <= 0 {
		nc.Close()
		return nil, fmt.Errorf("connect: refused (%v, timeout %d)", err, resp.TimeOut)
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// send writes one request; xid is the session's next.
func (c *rawSession) send(w io.Writer, op encoding.Op, req encoding.Record) error {
	c.xid++
	c.buf = encoding.AppendFrame(c.buf[:0], &encoding.RequestHeader{Xid: encoding.Xid(c.xid), Op: op}, req)
	_, err := w.Write(c.buf)
	return err
}

// recv reads the next reply, skipping pings' answers, and fails on an error code.
func (c *rawSession) recv() error { return c.recvInto(nil) }

// recvInto is recv that also decodes the reply's body into resp, if not nil.
func (c *rawSession) recvInto(resp encoding.Record) error {
	for {
		c.nc.SetReadDeadline(time.Now().Add(2 * memSessionTimeout))
		frame, err := encoding.ReadFrame(c.br, nil, 0)
		if err != nil {
			return err
		}
		var h encoding.ReplyHeader
		if err := encoding.DecodeRecord(frame[:encoding.ReplyHeaderSize], &h); err != nil {
			return err
		}
		if h.Xid == encoding.XidPing || h.Xid == encoding.XidNotification {
			continue
		}
		if h.Err != encoding.ErrOK {
			return h.Err
		}
		if resp != nil {
			return encoding.DecodeRecord(frame[encoding.ReplyHeaderSize:], resp)
		}
		return nil
	}
}

// call sends one request and waits for its reply.
func (c *rawSession) call(op encoding.Op, req encoding.Record) error { return c.callInto(op, req, nil) }

// callInto is call that also decodes the reply's body into resp, if not nil.
func (c *rawSession) callInto(op encoding.Op, req, resp encoding.Record) error {
	c.mu.Lock()
	err := c.send(c.nc, op, req)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.recvInto(resp)
}

// pipeline sends the requests req(from) ... req(to-1), depth at a time, and reads their
// replies.
func (c *rawSession) pipeline(from, to, depth int, req func(i int) (encoding.Op, encoding.Record)) error {
	for i := from; i < to; i += depth {
		end := min(i+depth, to)
		c.mu.Lock()
		bw := bufio.NewWriter(c.nc)
		var err error
		for j := i; j < end && err == nil; j++ {
			op, r := req(j)
			err = c.send(bw, op, r)
		}
		if err == nil {
			err = bw.Flush()
		}
		c.mu.Unlock()
		if err != nil {
			return err
		}
		for j := i; j < end; j++ {
			if err := c.recv(); err != nil {
				return fmt.Errorf("request %d: %w", j, err)
			}
		}
	}
	return nil
}

func (c *rawSession) ping() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = encoding.AppendFrame(c.buf[:0], &encoding.RequestHeader{Xid: encoding.XidPing, Op: encoding.OpPing})
	c.nc.SetWriteDeadline(time.Now().Add(memPingEvery))
	c.nc.Write(c.buf)
	c.nc.SetWriteDeadline(time.Time{})
}

func (c *rawSession) close() { c.nc.Close() }

// sessionPool holds the step's sessions and keeps them alive. Ping answers pile up unread in
// each socket (a few bytes every memPingEvery) and are skipped by the next recv.
type sessionPool struct {
	mu       sync.Mutex
	sessions []*rawSession
	stopped  atomic.Bool
	done     chan struct{}
	once     sync.Once
}

func (p *sessionPool) add(c *rawSession) {
	p.mu.Lock()
	p.sessions = append(p.sessions, c)
	p.mu.Unlock()
}

func (p *sessionPool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// slice returns the sessions [from, to) in the order they were added (by several workers, so
// not by session number; each is used once, which is all that matters).
func (p *sessionPool) slice(from, to int) []*rawSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*rawSession(nil), p.sessions[from:to]...)
}

func (p *sessionPool) stopCh() chan struct{} {
	p.once.Do(func() { p.done = make(chan struct{}) })
	return p.done
}

func (p *sessionPool) pingLoop() {
	t := time.NewTicker(memPingEvery)
	defer t.Stop()
	done := p.stopCh()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		p.mu.Lock()
		all := append([]*rawSession(nil), p.sessions...)
		p.mu.Unlock()
		for _, c := range all {
			if p.stopped.Load() {
				return
			}
			c.ping()
		}
	}
}

func (p *sessionPool) closeAll() {
	p.stopped.Store(true)
	close(p.stopCh())
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.sessions {
		c.close()
	}
	p.sessions = nil
}

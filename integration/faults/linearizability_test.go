package faults

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/tcpproxy"
)

// The consistency test: histories of writes and reads on a few znodes, recorded from
// several sessions on two zetcd processes in front of a three-member etcd cluster while etcd
// members and zetcd processes are killed (SIGKILL) and paused (SIGSTOP), etcd members cut off
// from the others (a member that keeps answering what needs no leader), and a zetcd cut off from
// etcd (its connections kept up, its writes held on the way), checked against what zetcd
// guarantees:
//
//   - writes (setData, compare-and-set by version) and sync+getData are linearizable: porcupine
//     checks them against a register per znode holding (data, version);
//   - per session, reads never go back in time: the version and mzxid a session sees of a znode
//     (its own acknowledged writes included) never decrease, also when it resumes on the other
//     zetcd;
//   - a write acknowledged by a zetcd process is visible to every read that process serves
//     later (plain getData, which may otherwise lag across processes).
//
// An operation that fails with anything but a ZooKeeper answer that says what happened
// (connection loss, timeout, a closed or expired session, a server error) has an unknown
// outcome: it stays in the history with no return (porcupine may place it anywhere after its
// call, or at the very end, as if it never took effect).

const (
	linFaultTime      = 46 * time.Second
	linSessionTimeout = 6 * time.Second // the client's receive timeout is 2/3 of it: 4s
	linDrain          = 15 * time.Second
	linCheckTimeout   = 60 * time.Second
	linUnknownReturn  = math.MaxInt64 // "never returned": an unknown outcome
)

// linMix is how a worker chooses its operations: the share, in percent, of set, of read-then-
// compare-and-set and of sync+get; plain gets take the rest.
type linMix struct{ set, cas, syncGet int }

// linScenario is who runs which operations on how many znodes.
type linScenario struct {
	only  int // sessions that know only zetcd A, and as many that know only B
	pairs int // pairs of sessions that know both, one starting on each
	keys  int // znodes
	mix   linMix
}

var (
	// linDefault is TestFaultLinearizability's: six sessions on three znodes.
	linDefault = linScenario{only: 2, pairs: 1, keys: 3, mix: linMix{set: 30, cas: 30, syncGet: 25}}
	// linWriteHeavy is TestFaultLinearizabilityWriteHeavy's: ten sessions, 85% writes, on six
	// znodes (twelve until linModel: porcupine's own search over unknown outcomes did not end).
	linWriteHeavy = linScenario{only: 3, pairs: 2, keys: 6, mix: linMix{set: 55, cas: 30, syncGet: 10}}
)

// linKind is the kind of an operation in the linearizability model.
type linKind int

const (
	linSet     linKind = iota // setData with version -1
	linCAS                    // setData with an expected version
	linSyncGet                // sync, then getData
)

// linInput is an operation's input: on which znode, and what it writes or expects.
type linInput struct {
	kind   linKind
	key    string
	value  string // written (set, cas)
	expect int32  // expected version (cas)
}

// linOutput is an operation's outcome.
type linOutput struct {
	unknown    bool   // no answer that says what happened
	badVersion bool   // cas refused: the version differed
	data       string // read (syncGet)
	version    int32  // read (syncGet) or the new version (set, cas)
	err        string // the error of an unknown outcome, for the visualization
}

// linState is a znode as a model sees it: its data and version and, in linModel, the writes
// with an unknown outcome that have not taken effect (yet).
type linState struct {
	data    string
	version int32
	pending string // linModel's pending writes, as addPending keeps them (comparable)
}

// linInitData is what each znode holds when the history starts (version 0).
const linInitData = "init"

// linRegister is the specification: a register per znode with its version, partitioned by
// znode. porcupine places a write with an unknown outcome anywhere after its call, or at the
// end (as if it never took effect). linModel checks the same faster; TestLinearizabilityModel
// compares the two.
var linRegister = porcupine.Model{
	Partition: linPartition,
	Init:      func() any { return linState{data: linInitData} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		if out.unknown {
			next, _ := s.apply(in)
			return true, next
		}
		return linStep(s, in, out)
	},
	DescribeOperation: describeLinOperation,
	DescribeState:     func(state any) string { return describeLinState(state.(linState)) },
}

// linModel returns a model that decides as linRegister does for the histories prepareLinHistory
// returns, faster; TestLinearizabilityModel compares the two. A write of unknown outcome is
// registered at its call and kept in the state as pending; each later operation first applies
// as many pending writes as its answer needs (its version says how many), in every way it can,
// each taking a version that no acknowledged write of history returned (two writes never take
// one version). porcupine itself tries an operation that never returned at every step after its
// call, in every combination with the others pending: with a few on one znode that grew beyond
// a minute for 32,000 operations with 57 unknown outcomes (CI).
func linModel(history []porcupine.Operation) porcupine.Model {
	acked := linVersions{} // the versions acknowledged writes returned
	for _, op := range history {
		if in, out := op.Input.(linInput), op.Output.(linOutput); in.kind != linSyncGet && !out.unknown && !out.badVersion {
			acked[linVersion{in.key, out.version}] = true
		}
	}
	return (&porcupine.NondeterministicModel{
		Partition: linPartition,
		Init:      func() []any { return []any{linState{data: linInitData}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(linState), input.(linInput), output.(linOutput)
			switch {
			case out.unknown && in.kind == linSyncGet: // takes no effect
				return []any{s}
			case out.unknown:
				return []any{linState{data: s.data, version: s.version, pending: addPending(s.pending, in)}}
			}
			var next []any
			for _, p := range applyPending(s, linPendingNeeded(s, in, out), in.key, acked) {
				if ok, n := linStep(p, in, out); ok {
					next = append(next, n)
				}
			}
			return next
		},
		Hash: func(state any) uint64 {
			s := state.(linState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%s\x00%d\x00%s", s.data, s.version, s.pending)
			return h.Sum64()
		},
		DescribeOperation: describeLinOperation,
		DescribeState:     func(state any) string { return describeLinState(state.(linState)) },
	}).ToModel()
}

// prepareLinHistory returns history as linModel takes it, with the same answer from porcupine:
//   - a sync+get of unknown outcome is left out: it took no effect;
//   - a write of unknown outcome returns at its call: linModel registers it there and applies it
//     later if at all, which covers every place it may have taken effect;
//   - the value of such a write that no sync+get read becomes linUnread: a value matters only to
//     a read that returned it, and writes alike (a cas, alike with those expecting the same
//     version) make one state where each choice of which filled a version would make one.
func prepareLinHistory(history []porcupine.Operation) []porcupine.Operation {
	type value struct{ key, value string }
	read := map[value]bool{} // the values sync+gets returned
	for _, op := range history {
		if in, out := op.Input.(linInput), op.Output.(linOutput); in.kind == linSyncGet && !out.unknown {
			read[value{in.key, out.data}] = true
		}
	}
	prepared := make([]porcupine.Operation, 0, len(history))
	for _, op := range history {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if out.unknown {
			if in.kind == linSyncGet {
				continue
			}
			if !read[value{in.key, in.value}] {
				in.value = linUnread
				op.Input = in
			}
			op.Return = op.Call
		}
		prepared = append(prepared, op)
	}
	return prepared
}

// linUnread is the value prepareLinHistory gives a write of unknown outcome that no sync+get
// read (no written value holds a NUL).
const linUnread = "\x00unread"

// apply returns the state after the operation in, and whether it changed it: a set does, a cas
// on the version it expects does; pending writes are kept.
func (s linState) apply(in linInput) (linState, bool) {
	if in.kind == linSyncGet || in.kind == linCAS && s.version != in.expect {
		return s, false
	}
	return linState{data: in.value, version: s.version + 1, pending: s.pending}, true
}

// linStep is the register's step for an operation with a known outcome.
func linStep(s linState, in linInput, out linOutput) (bool, linState) {
	if in.kind == linSyncGet {
		return out.data == s.data && out.version == s.version, s
	}
	next, changed := s.apply(in)
	if !changed {
		return out.badVersion, s
	}
	return !out.badVersion && out.version == next.version, next
}

// linVersion is a version of a znode; linVersions a set of them.
type linVersion struct {
	key     string
	version int32
}

type linVersions map[linVersion]bool

// linPendingNeeded is how many pending writes must take effect before the operation for its
// answer to be possible: as many as the versions its answer skips. A refused cas needs one only
// if the version is the one it expected; others may take effect later, before a later
// operation, to the same effect. Below zero: none can (the answer is older than the state).
func linPendingNeeded(s linState, in linInput, out linOutput) int {
	switch {
	case in.kind == linSyncGet:
		return int(out.version - s.version)
	case out.badVersion && s.version == in.expect:
		return 1
	case out.badVersion:
		return 0
	default:
		return int(out.version - 1 - s.version)
	}
}

// applyPending returns every state s of znode key can reach by applying n of its pending writes,
// one after another (a cas only on the version it expects), each taking a version not in acked;
// duplicates are left to porcupine's merge.
func applyPending(s linState, n int, key string, acked linVersions) []linState {
	if n == 0 {
		return []linState{s}
	}
	if n < 0 || n > strings.Count(s.pending, "\n") || acked[linVersion{key, s.version + 1}] {
		return nil
	}
	var reached []linState
	for i := 0; i < len(s.pending); {
		end := i + strings.IndexByte(s.pending[i:], '\n') + 1
		next, changed := s.apply(parsePending(s.pending[i:end]))
		next.pending = s.pending[:i] + s.pending[end:] // still sorted
		i = end
		if changed {
			reached = append(reached, applyPending(next, n-1, key, acked)...)
		}
	}
	return reached
}

// addPending returns the pending writes with w added. Pending writes are kept comparable as one
// line each ("<kind> <expect> <value>\n"), sorted; the values written hold no newline.
func addPending(pending string, w linInput) string {
	line := fmt.Sprintf("%d %d %s\n", w.kind, w.expect, w.value)
	i := 0
	for i < len(pending) {
		end := i + strings.IndexByte(pending[i:], '\n') + 1
		if pending[i:end] >= line {
			break
		}
		i = end
	}
	return pending[:i] + line + pending[i:]
}

// parsePending reads one of addPending's lines back (the key is not kept: one partition, one
// znode).
func parsePending(line string) linInput {
	kind, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	expect, value, _ := strings.Cut(rest, " ")
	k, err1 := strconv.Atoi(kind)
	e, err2 := strconv.Atoi(expect)
	if err := errors.Join(err1, err2); err != nil {
		panic(fmt.Sprintf("pending write %q: %v", line, err))
	}
	return linInput{kind: linKind(k), expect: int32(e), value: value}
}

// linPartition splits a history by znode: each znode is a register of its own.
func linPartition(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(linInput).key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	sort.Strings(keys)
	var parts [][]porcupine.Operation
	for _, k := range keys {
		parts = append(parts, byKey[k])
	}
	return parts
}

// describeLinOperation is both models' DescribeOperation.
func describeLinOperation(input, output any) string {
	in, out := input.(linInput), output.(linOutput)
	var res string
	switch {
	case out.unknown:
		res = "unknown (" + out.err + ")"
	case out.badVersion:
		res = "BadVersion"
	case in.kind == linSyncGet:
		res = fmt.Sprintf("%q v%d", out.data, out.version)
	default:
		res = fmt.Sprintf("ok v%d", out.version)
	}
	switch in.kind {
	case linSet:
		return fmt.Sprintf("set(%s, %q) -> %s", in.key, in.value, res)
	case linCAS:
		return fmt.Sprintf("cas(%s, v%d, %q) -> %s", in.key, in.expect, in.value, res)
	default:
		return fmt.Sprintf("sync+get(%s) -> %s", in.key, res)
	}
}

// describeLinState is both models' DescribeState.
func describeLinState(s linState) string {
	if s.pending == "" {
		return fmt.Sprintf("%q v%d", s.data, s.version)
	}
	return fmt.Sprintf("%q v%d, %d write(s) pending", s.data, s.version, strings.Count(s.pending, "\n"))
}

// linObs is one thing a session learned of a znode: a read's Stat or the Stat its own
// acknowledged write returned.
type linObs struct {
	client  int    // the worker
	session int64  // the ZooKeeper session it belonged to (0: unsure, not used)
	server  string // the zetcd that served it, as "addr#incarnation" ("": unsure)
	key     string
	what    string // e.g. "get", "sync+get", "set", "cas"
	write   bool   // an acknowledged write
	version int32
	mzxid   int64
	call    int64 // ns since the history began
	ret     int64
}

// linWorker is one session's client: it runs operations one at a time and records them.
type linWorker struct {
	id    int
	conn  *zk.Conn
	addrs []string
	mix   linMix
	// incarnation, per zetcd address, counts its restarts (set by the test's goroutine).
	incarnation map[string]*atomic.Int64
	expired     atomic.Int64 // StateExpired events seen

	// Owned by the worker's goroutine until it ends.
	ops        []porcupine.Operation
	obs        []linObs
	counts     map[string]int
	lastServer string
	moves      int // times the client was found on another zetcd address than before
}

// where says which session and which zetcd process the client is on now.
func (w *linWorker) where() (int64, string) {
	server := w.conn.Server()
	if server != w.lastServer && w.lastServer != "" {
		w.moves++
	}
	w.lastServer = server
	inc, ok := w.incarnation[server]
	if !ok {
		return w.conn.SessionID(), ""
	}
	return w.conn.SessionID(), fmt.Sprintf("%s#%d", server, inc.Load())
}

// observe records what a successful operation saw of key, if the session and server are
// the same before and after it (otherwise who served it is unsure).
func (w *linWorker) observe(key, what string, write bool, st *zk.Stat, call, ret int64, sess0 int64, srv0 string) {
	sess1, srv1 := w.where()
	o := linObs{client: w.id, key: key, what: what, write: write, version: st.Version, mzxid: st.Mzxid, call: call, ret: ret}
	if sess0 == sess1 {
		o.session = sess0
	}
	if srv0 == srv1 {
		o.server = srv0
	}
	w.obs = append(w.obs, o)
}

// outcome is what err says about a write.
func linOutcome(err error) linOutput {
	switch {
	case err == nil:
		return linOutput{}
	case errors.Is(err, zk.ErrBadVersion):
		return linOutput{badVersion: true}
	default:
		return linOutput{unknown: true, err: err.Error()}
	}
}

// run does operations on keys until stop is closed.
func (w *linWorker) run(stop <-chan struct{}, t0 time.Time, keys []string) {
	rng := rand.New(rand.NewPCG(uint64(w.id), uint64(t0.UnixNano())))
	w.counts = map[string]int{}
	now := func() int64 { return int64(time.Since(t0)) }
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		key := keys[rng.IntN(len(keys))]
		value := fmt.Sprintf("c%d-%d", w.id, n)
		sess0, srv0 := w.where()
		switch r := rng.IntN(100); {
		case r < w.mix.set: // set
			call := now()
			st, err := w.conn.Set(key, []byte(value), -1)
			ret := now()
			w.record(linInput{kind: linSet, key: key, value: value}, call, ret, err, st)
			if err == nil {
				w.observe(key, "set", true, st, call, ret, sess0, srv0)
			}
		case r < w.mix.set+w.mix.cas: // read, then compare-and-set on the version read
			call := now()
			_, st, err := w.conn.Get(key)
			ret := now()
			if err != nil {
				w.counts["get error"]++
				continue
			}
			w.observe(key, "get", false, st, call, ret, sess0, srv0)
			expect := st.Version
			sess0, srv0 = w.where()
			call = now()
			st, err = w.conn.Set(key, []byte(value), expect)
			ret = now()
			w.record(linInput{kind: linCAS, key: key, value: value, expect: expect}, call, ret, err, st)
			if err == nil {
				w.observe(key, "cas", true, st, call, ret, sess0, srv0)
			}
		case r < w.mix.set+w.mix.cas+w.mix.syncGet: // sync, then read
			call := now()
			_, err := w.conn.Sync(key)
			var data []byte
			var st *zk.Stat
			if err == nil {
				data, st, err = w.conn.Get(key)
			}
			ret := now()
			in := linInput{kind: linSyncGet, key: key}
			if err != nil {
				w.record(in, call, ret, err, nil)
				continue
			}
			w.ops = append(w.ops, porcupine.Operation{ClientId: w.id, Input: in, Call: call,
				Output: linOutput{data: string(data), version: st.Version}, Return: ret})
			w.counts["sync+get"]++
			w.observe(key, "sync+get", false, st, call, ret, sess0, srv0)
		default: // plain read: not linearizable across processes, for the other checks only
			call := now()
			_, st, err := w.conn.Get(key)
			ret := now()
			if err != nil {
				w.counts["get error"]++
				continue
			}
			w.counts["get"]++
			w.observe(key, "get", false, st, call, ret, sess0, srv0)
		}
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
}

// record adds a write or a failed sync+get to the history; an unknown outcome never returns.
func (w *linWorker) record(in linInput, call, ret int64, err error, st *zk.Stat) {
	out := linOutcome(err)
	name := [...]string{linSet: "set", linCAS: "cas", linSyncGet: "sync+get"}[in.kind]
	switch {
	case out.unknown:
		ret = linUnknownReturn
		w.counts[name+" unknown"]++
	case out.badVersion:
		w.counts[name+" BadVersion"]++
	default:
		out.version = st.Version
		w.counts[name]++
	}
	w.ops = append(w.ops, porcupine.Operation{ClientId: w.id, Input: in, Call: call, Output: out, Return: ret})
}

// linConnect opens a session on addrs and counts its expirations in w.
func linConnect(t *testing.T, w *linWorker) {
	t.Helper()
	conn, events, err := zk.Connect(w.addrs, linSessionTimeout, zk.WithLogInfo(false), zk.WithLogger(itest.QuietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	w.conn = conn
	connected := make(chan struct{})
	go func() {
		once := sync.OnceFunc(func() { close(connected) })
		for ev := range events {
			switch ev.State {
			case zk.StateHasSession:
				once()
			case zk.StateExpired:
				w.expired.Add(1)
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(20 * time.Second):
		t.Fatalf("no session on %v after 20s", w.addrs)
	}
}

// restartEtcdMember starts a killed member again with its data directory and flags, and waits
// until it serves.
func restartEtcdMember(t *testing.T, m *itest.EtcdMember) {
	t.Helper()
	m.Start(t, m.Cmd.Path, m.Cmd.Args[1:]...)
	if err := m.WaitServing(); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// linFaults is the test's fault injector; only the test's goroutine uses it.
type linFaults struct {
	t           *testing.T
	t0          time.Time
	members     []*itest.EtcdMember
	net         *itest.PeerNet    // the members' peer connections
	endpoints   []string          // each zetcd's --endpoints
	proxies     []*tcpproxy.Proxy // between zetcd A and the members
	zetcds      []*itest.ZetcdProcess
	incarnation map[string]*atomic.Int64
	annotations []porcupine.Annotation
	log         []string
}

// do runs one fault (or fault and repair) and notes it for the log and the visualization.
func (f *linFaults) do(what string, fault func()) {
	start := int64(time.Since(f.t0))
	fault()
	end := int64(time.Since(f.t0))
	f.annotations = append(f.annotations, porcupine.Annotation{Tag: "faults", Start: start, End: end, Description: what, BackgroundColor: "#f4cccc"})
	f.log = append(f.log, fmt.Sprintf("%6.2fs-%6.2fs %s", float64(start)/1e9, float64(end)/1e9, what))
}

func (f *linFaults) killZetcd(i int, down time.Duration) {
	p := f.zetcds[i]
	f.do(fmt.Sprintf("kill -9 zetcd %c, restart it %v later", 'A'+i, down), func() {
		f.incarnation[p.Addr].Add(1)
		p.Kill()
		time.Sleep(down)
		f.zetcds[i] = itest.StartProcessArgs(f.t, p.Addr, "--endpoints", f.endpoints[i])
	})
}

func (f *linFaults) pauseZetcd(i int, d time.Duration) {
	p := f.zetcds[i]
	f.do(fmt.Sprintf("pause zetcd %c for %v", 'A'+i, d), func() {
		if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			f.t.Fatal(err)
		}
		time.Sleep(d)
		if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			f.t.Fatal(err)
		}
	})
}

// member returns the etcd leader, or a follower, and which it is.
func (f *linFaults) member(leader bool) (*itest.EtcdMember, string) {
	m := itest.ClusterLeader(f.t, f.members)
	if leader {
		return m, "leader"
	}
	return followersOf(f.members, m)[0], "follower"
}

func (f *linFaults) pauseMember(leader bool, d time.Duration) {
	m, role := f.member(leader)
	f.do(fmt.Sprintf("pause etcd %s %s for %v", role, m.Name, d), func() {
		m.Signal(f.t, syscall.SIGSTOP)
		time.Sleep(d)
		m.Signal(f.t, syscall.SIGCONT)
	})
}

func (f *linFaults) cutMember(leader bool, d time.Duration) {
	m, role := f.member(leader)
	f.do(fmt.Sprintf("cut etcd %s %s off from the others for %v", role, m.Name, d), func() {
		f.net.Isolate(slices.Index(f.members, m))
		time.Sleep(d)
		f.net.Heal()
	})
}

// cutZetcd cuts zetcd A off from every etcd member for d, keeping its connections up.
func (f *linFaults) cutZetcd(d time.Duration) {
	f.do(fmt.Sprintf("cut zetcd A off from etcd for %v", d), func() {
		for _, p := range f.proxies {
			p.Freeze()
		}
		time.Sleep(d)
		for _, p := range f.proxies {
			p.Thaw()
		}
	})
}

func (f *linFaults) killLeader(down time.Duration) {
	m := itest.ClusterLeader(f.t, f.members)
	f.do(fmt.Sprintf("kill -9 etcd leader %s, restart it %v later", m.Name, down), func() {
		m.Signal(f.t, syscall.SIGKILL)
		<-m.Exited
		time.Sleep(down)
		restartEtcdMember(f.t, m)
	})
}

// TestFaultLinearizability records operations from six sessions on two zetcd processes (two
// sessions only know A, two only B, two know both and move when theirs dies or stalls) on
// three znodes while, for about 46 s, etcd members and zetcd processes are killed and paused,
// and etcd members cut off, one at a time, each repaired before the next; then it checks the history (see the top of this
// file). On a linearizability violation it writes porcupine's visualization to a file it names.
func TestFaultLinearizability(t *testing.T) {
	linRun(t, linDefault)
}

// TestFaultLinearizabilityWriteHeavy is TestFaultLinearizability with ten sessions (three only
// on A, three only on B, four on both) whose operations are 85% writes, on six znodes: more
// writes in flight at once from different sessions, under the same faults (what group commit
// batches: docs/design.md, "Group commit").
func TestFaultLinearizabilityWriteHeavy(t *testing.T) {
	linRun(t, linWriteHeavy)
}

// linRun records and checks a history as TestFaultLinearizability describes, for sc.
func linRun(t *testing.T, sc linScenario) {
	pn, members := partitionCluster(t)
	// zetcd A reaches etcd through proxies, which cutZetcd freezes.
	var proxies []*tcpproxy.Proxy
	var aEndpoints []string
	for _, m := range members {
		p, endpoint := proxyTo(t, m.ClientURL)
		proxies = append(proxies, p)
		aEndpoints = append(aEndpoints, endpoint)
	}
	endpoints := []string{strings.Join(aEndpoints, ","), itest.ClusterEndpoints(members)}
	a := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", endpoints[0])
	b := itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", endpoints[1])
	incarnation := map[string]*atomic.Int64{a.Addr: {}, b.Addr: {}}

	setup := connect(t, a.Addr)
	if _, err := setup.Create("/lin", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range sc.keys {
		k := fmt.Sprintf("/lin/k%d", i)
		if _, err := setup.Create(k, []byte(linInitData), 0, openACL); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	setup.Close()

	var addrs [][]string
	for _, addr := range []string{a.Addr, b.Addr} {
		for range sc.only {
			addrs = append(addrs, []string{addr})
		}
	}
	for range sc.pairs {
		addrs = append(addrs, []string{a.Addr, b.Addr}, []string{b.Addr, a.Addr})
	}
	workers := make([]*linWorker, len(addrs))
	for i := range workers {
		workers[i] = &linWorker{id: i, addrs: addrs[i], mix: sc.mix, incarnation: incarnation}
		linConnect(t, workers[i])
	}

	t0 := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.run(stop, t0, keys) })
	}
	stopWorkers := sync.OnceFunc(func() {
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(linDrain):
			// Operations stuck on a server: closing the sessions fails them (unknown outcome).
			for _, w := range workers {
				w.conn.Close()
			}
			<-done
		}
	})
	t.Cleanup(stopWorkers) // if a fault fails the test

	f := &linFaults{t: t, t0: t0, members: members, net: pn, endpoints: endpoints, proxies: proxies, zetcds: []*itest.ZetcdProcess{a, b}, incarnation: incarnation}
	faults := []func(){
		func() { f.killZetcd(0, time.Second) },
		func() { f.pauseMember(true, 3*time.Second) },
		func() { f.cutMember(true, 4*time.Second) }, // longer than etcd's wait for no leader (3 s)
		func() { f.pauseZetcd(1, 5*time.Second) },   // longer than the clients' receive timeout: they move
		func() { f.killLeader(2 * time.Second) },
		func() { f.cutMember(false, 4*time.Second) },
		func() { f.cutZetcd(5 * time.Second) }, // longer than the clients' receive timeout: they move
		func() { f.killZetcd(1, time.Second) },
		func() { f.pauseZetcd(0, 2*time.Second) },
		func() { f.pauseMember(false, 2*time.Second) },
	}
	time.Sleep(time.Second)
	for i := 0; time.Since(t0) < linFaultTime; i++ {
		faults[i%len(faults)]()
		time.Sleep(time.Second)
	}
	time.Sleep(time.Second)
	stopWorkers()
	for _, l := range f.log {
		t.Log(l)
	}

	var history []porcupine.Operation
	var obs []linObs
	counts := map[string]int{}
	for _, w := range workers {
		history = append(history, w.ops...)
		obs = append(obs, w.obs...)
		for k, n := range w.counts {
			counts[k] += n
		}
		t.Logf("client %d on %v: %d operations, moved between zetcds %d times", w.id, w.addrs, len(w.ops), w.moves)
		if n := w.expired.Load(); n > 0 {
			t.Logf("session %d (%v) expired %d time(s); it went on with a new session", w.id, w.addrs, n)
		}
	}
	t.Logf("history: %d operations in %.1fs (%v), %d observations for the per-session and per-process checks",
		len(history), time.Since(t0).Seconds(), counts, len(obs))
	if counts["set"]+counts["cas"] == 0 || counts["sync+get"] == 0 {
		t.Fatal("no write or no sync+get was acknowledged: the history checks nothing")
	}

	checkLinearizable(t, history, f.annotations)
	itest.ReportViolations(t, "monotonic reads per session", monotonicViolations(obs))
	itest.ReportViolations(t, "a process reads its acknowledged writes", processViolations(obs))
}

// checkLinearizable checks history with porcupine (linModel, on the history prepareLinHistory
// makes of it); on a violation it writes porcupine's visualization (with the faults as
// annotations; a write of unknown outcome shows as returning at its call) and names the file.
func checkLinearizable(t *testing.T, history []porcupine.Operation, annotations []porcupine.Annotation) {
	t.Helper()
	start := time.Now()
	history = prepareLinHistory(history)
	model := linModel(history)
	res := porcupine.CheckOperationsTimeout(model, history, linCheckTimeout)
	t.Logf("porcupine: %s in %v", res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		// Checked again for the partial linearizations the visualization shows (many times
		// slower, so only on a violation). Not t.TempDir(): the file must outlive the test.
		_, info := porcupine.CheckOperationsVerbose(model, history, linCheckTimeout)
		info.AddAnnotations(annotations)
		f, err := os.CreateTemp("", "zetcd-linearizability-*.html")
		if err == nil {
			err = porcupine.Visualize(model, info, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Errorf("the history of writes and sync+gets is not linearizable (porcupine's visualization failed: %v)", err)
			return
		}
		t.Errorf("the history of writes and sync+gets is not linearizable; porcupine's visualization (faults annotated): %s", f.Name())
	default:
		t.Errorf("porcupine could not decide within %v whether the history is linearizable", linCheckTimeout)
	}
}

// monotonicViolations returns where a session saw a znode go back: the version and mzxid of
// successive reads and acknowledged writes of one session on one znode must never decrease.
// obs holds each worker's observations in the worker's order.
func monotonicViolations(obs []linObs) []string {
	type sessKey struct {
		client int
		key    string
	}
	last := map[sessKey]linObs{}
	var bad []string
	for _, o := range obs {
		if o.session == 0 {
			continue
		}
		k := sessKey{o.client, o.key}
		prev, ok := last[k]
		if ok && prev.session == o.session && (o.version < prev.version || o.mzxid < prev.mzxid) {
			bad = append(bad, fmt.Sprintf("session %x (client %d) went back in time on %s: %s from %.3fs saw version %d mzxid %#x after %s from %.3fs saw version %d mzxid %#x",
				o.session, o.client, o.key, o.what, float64(o.call)/1e9, o.version, o.mzxid, prev.what, float64(prev.call)/1e9, prev.version, prev.mzxid))
		}
		last[k] = o
	}
	return bad
}

// processViolations returns the reads that missed a write their zetcd process had
// acknowledged before they were sent: a read served by a process must see at least the
// version of every write that process acknowledged before.
func processViolations(obs []linObs) []string {
	type procKey struct{ server, key string }
	writes := map[procKey][]linObs{}
	for _, o := range obs {
		if o.write && o.server != "" {
			k := procKey{o.server, o.key}
			writes[k] = append(writes[k], o)
		}
	}
	// newest[k][i] is the index of the highest version among writes[k][:i+1].
	newest := map[procKey][]int{}
	for k, ws := range writes {
		sort.Slice(ws, func(i, j int) bool { return ws[i].ret < ws[j].ret })
		idx := make([]int, len(ws))
		for i := range ws {
			if idx[i] = i; i > 0 && ws[idx[i-1]].version > ws[i].version {
				idx[i] = idx[i-1]
			}
		}
		newest[k] = idx
	}
	var bad []string
	for _, r := range obs {
		if r.write || r.server == "" {
			continue
		}
		k := procKey{r.server, r.key}
		ws := writes[k]
		n := sort.Search(len(ws), func(i int) bool { return ws[i].ret >= r.call }) // acknowledged before r was sent
		if n == 0 {
			continue
		}
		if w := ws[newest[k][n-1]]; w.version > r.version {
			bad = append(bad, fmt.Sprintf("zetcd %s acknowledged %s of %s (version %d) at %.3fs, then a %s it served from %.3fs saw version %d",
				r.server, w.what, r.key, w.version, float64(w.ret)/1e9, r.what, float64(r.call)/1e9, r.version))
		}
	}
	return bad
}

// TestLinearizabilityChecks shows that TestFaultLinearizability's checks can fail: each is fed
// small histories, some allowed and some not.
func TestLinearizabilityChecks(t *testing.T) {
	op := func(client int, in linInput, call int64, out linOutput, ret int64) porcupine.Operation {
		if out.unknown {
			ret = linUnknownReturn
		}
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	set := func(v string) linInput { return linInput{kind: linSet, key: "/k", value: v} }
	cas := func(expect int32, v string) linInput {
		return linInput{kind: linCAS, key: "/k", value: v, expect: expect}
	}
	get := linInput{kind: linSyncGet, key: "/k"}
	read := func(data string, version int32) linOutput { return linOutput{data: data, version: version} }
	wrote := func(version int32) linOutput { return linOutput{version: version} }
	lost := linOutput{unknown: true, err: "zk: connection closed"}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"set then read", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 10), op(1, get, 20, read("a", 1), 30)}, true},
		{"stale read after an acknowledged set", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 10), op(1, get, 20, read(linInitData, 0), 30)}, false},
		{"concurrent read may see the old value", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 30), op(1, get, 10, read(linInitData, 0), 20)}, true},
		{"read of a value never written", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 10), op(1, get, 20, read("b", 1), 30)}, false},
		{"wrong version returned", []porcupine.Operation{op(0, set("a"), 0, wrote(2), 10)}, false},
		{"cas on the current version", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 10), op(1, cas(1, "b"), 20, wrote(2), 30), op(0, get, 40, read("b", 2), 50)}, true},
		{"cas refused on the current version", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 10), op(1, cas(1, "b"), 20, linOutput{badVersion: true}, 30)}, false},
		{"cas granted on an old version", []porcupine.Operation{op(0, set("a"), 0, wrote(1), 10), op(1, cas(0, "b"), 20, wrote(1), 30)}, false},
		{"lost set seen later", []porcupine.Operation{op(0, set("a"), 0, lost, 0), op(1, get, 20, read("a", 1), 30), op(1, get, 40, read("a", 1), 50)}, true},
		{"lost set never seen", []porcupine.Operation{op(0, set("a"), 0, lost, 0), op(1, get, 20, read(linInitData, 0), 30)}, true},
		{"lost set seen, then unseen", []porcupine.Operation{op(0, set("a"), 0, lost, 0), op(1, get, 20, read("a", 1), 30), op(1, get, 40, read(linInitData, 0), 50)}, false},
		{"lost set seen before it was sent", []porcupine.Operation{op(1, get, 0, read("a", 1), 10), op(0, set("a"), 20, lost, 0)}, false},
	} {
		if got := porcupine.CheckOperations(linRegister, tc.history); got != tc.ok {
			t.Errorf("%s: linearizable %v by linRegister, want %v", tc.name, got, tc.ok)
		}
		h := prepareLinHistory(tc.history)
		if got := porcupine.CheckOperations(linModel(h), h); got != tc.ok {
			t.Errorf("%s: linearizable %v by linModel, want %v", tc.name, got, tc.ok)
		}
	}

	obs := func(client int, session int64, server string, write bool, version int32, call, ret int64) linObs {
		return linObs{client: client, session: session, server: server, key: "/k", what: "get", write: write, version: version, mzxid: int64(version) << 32, call: call, ret: ret}
	}
	for _, tc := range []struct {
		name                  string
		obs                   []linObs
		monotonic, ownProcess int // violations expected
	}{
		{"a session's reads go forward", []linObs{obs(0, 1, "A#0", false, 2, 0, 10), obs(0, 1, "A#0", false, 3, 20, 30)}, 0, 0},
		{"a session reads back", []linObs{obs(0, 1, "A#0", false, 3, 0, 10), obs(0, 1, "B#0", false, 2, 20, 30)}, 1, 0},
		{"a session reads back from before its own write", []linObs{obs(0, 1, "A#0", true, 3, 0, 10), obs(0, 1, "B#0", false, 2, 20, 30)}, 1, 0},
		{"another session reads older", []linObs{obs(0, 1, "A#0", false, 3, 0, 10), obs(1, 2, "B#0", false, 2, 20, 30)}, 0, 0},
		{"a new session (after expiry) reads older", []linObs{obs(0, 1, "A#0", false, 3, 0, 10), obs(0, 2, "B#0", false, 2, 20, 30)}, 0, 0},
		{"a process misses a write it acknowledged", []linObs{obs(0, 1, "A#0", true, 3, 0, 10), obs(1, 2, "A#0", false, 2, 20, 30)}, 0, 1},
		{"a read sent before the write returned", []linObs{obs(0, 1, "A#0", true, 3, 0, 20), obs(1, 2, "A#0", false, 2, 10, 30)}, 0, 0},
		{"another process lags", []linObs{obs(0, 1, "A#0", true, 3, 0, 10), obs(1, 2, "B#0", false, 2, 20, 30)}, 0, 0},
		{"a restarted process lags", []linObs{obs(0, 1, "A#0", true, 3, 0, 10), obs(1, 2, "A#1", false, 2, 20, 30)}, 0, 0},
	} {
		if got := len(monotonicViolations(tc.obs)); got != tc.monotonic {
			t.Errorf("%s: %d monotonic-read violations, want %d", tc.name, got, tc.monotonic)
		}
		if got := len(processViolations(tc.obs)); got != tc.ownProcess {
			t.Errorf("%s: %d own-process violations, want %d", tc.name, got, tc.ownProcess)
		}
	}
}

// TestLinearizabilityModel shows that linModel, on the history prepareLinHistory makes, decides
// as linRegister does on the history as recorded: on random histories of one znode from a
// register with concurrent operations, some with unknown outcomes (which took effect or not)
// and some with a wrong answer.
func TestLinearizabilityModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	verdicts := map[bool]int{}
	for i := 0; i < 5000; i++ {
		h := randomLinHistory(rng)
		p := prepareLinHistory(h)
		want, got := porcupine.CheckOperations(linRegister, h), porcupine.CheckOperations(linModel(p), p)
		if got != want {
			t.Fatalf("history %d: linearizable %v by linModel, %v by linRegister:\n%s", i, got, want, describeLinHistory(h))
		}
		verdicts[want]++
	}
	t.Logf("%d linearizable, %d not", verdicts[true], verdicts[false])
	if verdicts[true] == 0 || verdicts[false] == 0 {
		t.Fatal("the random histories do not exercise linModel")
	}
}

// randomLinHistory runs 3 to 10 operations of random kinds on one register, each taking effect
// at a random point of its interval. About one in four has an unknown outcome and took effect
// or not; in about one history in three an answer is then changed.
func randomLinHistory(rng *rand.Rand) []porcupine.Operation {
	type timed struct {
		op      porcupine.Operation
		at      int64
		applies bool // for an unknown outcome, whether it took effect
	}
	ops := make([]timed, 3+rng.IntN(8))
	for i := range ops {
		call := rng.Int64N(100)
		ret := call + 1 + rng.Int64N(30)
		in := linInput{kind: linKind(rng.IntN(3)), key: "/k", value: fmt.Sprintf("v%d", i), expect: rng.Int32N(4)}
		ops[i] = timed{op: porcupine.Operation{ClientId: i, Input: in, Call: call, Return: ret},
			at: call + rng.Int64N(ret-call+1), applies: rng.IntN(2) == 0}
		if rng.IntN(4) == 0 {
			ops[i].op.Output = linOutput{unknown: true}
			ops[i].op.Return = linUnknownReturn
		}
	}
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(ops[a].at - ops[b].at) })
	s := linState{data: linInitData}
	for _, i := range order {
		o := &ops[i]
		in := o.op.Input.(linInput)
		unknown := o.op.Output != nil
		if unknown && !o.applies {
			continue
		}
		next, changed := s.apply(in)
		out := linOutput{version: next.version}
		switch {
		case in.kind == linSyncGet:
			out.data = s.data
		case !changed:
			out = linOutput{badVersion: true}
		}
		s = next
		if !unknown {
			o.op.Output = out
		}
	}
	h := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		h[i] = o.op
	}
	if rng.IntN(3) == 0 {
		i := rng.IntN(len(h))
		if out := h[i].Output.(linOutput); !out.unknown && !out.badVersion {
			out.version += int32(1 - 2*rng.IntN(2))
			h[i].Output = out
		}
	}
	return h
}

// describeLinHistory lists a history's operations, one per line, for a failure message.
func describeLinHistory(h []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range h {
		ret := fmt.Sprint(op.Return)
		if op.Return == linUnknownReturn {
			ret = "never"
		}
		fmt.Fprintf(&b, "  [%d, %s] %s\n", op.Call, ret, describeLinOperation(op.Input, op.Output))
	}
	return b.String()
}

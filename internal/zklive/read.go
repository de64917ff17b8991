package zklive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// Config says how to reach a ZooKeeper and read it.
type Config struct {
	// Servers are host:port client addresses; the first that accepts a session is used, and
	// all of them are asked `cons` for session timeouts.
	Servers []string
	// Auth are the credentials added to the session (addAuth), e.g. {"digest", "user:pass"},
	// or the super user's digest ("super:password") of a ZooKeeper started with
	// zookeeper.DigestAuthenticationProvider.superDigest, which may read every node.
	Auth []Auth
	// SessionTimeout is the timeout asked for the reader's session; 0 means 30 s.
	SessionTimeout time.Duration
	// Parallel is how many nodes are read at once; 0 means 32.
	Parallel int
	// SweepInterval is how often Follow re-reads every node's ACL once ZooKeeper has applied
	// a transaction no watch event names (see Follow); 0 means 10 s. A sweep waits at least
	// nine times as long as the last one took, so that sweeps of a large tree take at most a
	// tenth of the time.
	SweepInterval time.Duration
	// Log receives what Read and Follow skip or retry; nil logs nothing.
	Log *zap.Logger
}

// Auth is one addAuth: a scheme and its credentials.
type Auth struct {
	Scheme string
	Auth   []byte
}

func (c *Config) sessionTimeout() time.Duration {
	if c.SessionTimeout > 0 {
		return c.SessionTimeout
	}
	return 30 * time.Second
}

func (c *Config) parallel() int {
	if c.Parallel > 0 {
		return c.Parallel
	}
	return 32
}

func (c *Config) sweepInterval() time.Duration {
	if c.SweepInterval > 0 {
		return c.SweepInterval
	}
	return 10 * time.Second
}

func (c *Config) log() *zap.Logger {
	if c.Log != nil {
		return c.Log
	}
	return zap.NewNop()
}

// ErrUnreadable marks the error of a node the reader may not read with the credentials given.
var ErrUnreadable = errors.New("not readable")

// fourLetterTimeout bounds one `cons` round trip.
const fourLetterTimeout = 5 * time.Second

// Read reads a running ZooKeeper's whole tree through the client protocol into the State
// zkdata.Load gives for its data directory, with the differences the package doc lists. It is
// exact for a ZooKeeper that no client changes while it reads; Follow is for one that changes.
func Read(ctx context.Context, cfg Config) (*zkdata.State, error) {
	s, err := dial(ctx, &cfg, func(notification) {})
	if err != nil {
		return nil, err
	}
	defer s.close()
	nodes, zxid, err := readTree(ctx, &cfg, s, "/")
	if err != nil {
		return nil, err
	}
	last, err := lastZxid(ctx, s)
	if err != nil {
		return nil, err
	}
	st := &zkdata.State{Nodes: nodes, LastZxid: max(zxid, last)}
	st.Sessions, st.Skipped = Sessions(cfg, nodes)
	return st, nil
}

// lastZxid returns ZooKeeper's last applied zxid: a read's ReplyHeader carries the server's
// last processed zxid (FinalRequestProcessor), and the sync before it brings a follower up to
// the leader.
func lastZxid(ctx context.Context, s *session) (int64, error) {
	if _, err := s.call(ctx, encoding.OpSync, &encoding.SyncRequest{Path: "/"}, &encoding.SyncResponse{}); err != nil {
		return 0, fmt.Errorf("sync /: %w", err)
	}
	hdr, err := s.call(ctx, encoding.OpExists, &encoding.ExistsRequest{Path: "/"}, &encoding.ExistsResponse{})
	if err != nil {
		return 0, fmt.Errorf("exists /: %w", err)
	}
	return int64(hdr.Zxid), nil
}

// maxAttempts bounds how often readNode re-reads a node that changes between its three reads.
const maxAttempts = 100

// readNode reads one node's data, ACL and children with the three requests in flight at once,
// again until all three Stats are equal: every change to a node moves its Stat (mzxid,
// aversion or cversion), so equal Stats are one state of the node. It returns nil for a node
// that does not exist, and the newest zxid the replies carried.
func readNode(ctx context.Context, s *session, p string) (*zkdata.Node, int64, error) {
	var zxid int64
	for range maxAttempts {
		gd := s.start(encoding.OpGetData, &encoding.GetDataRequest{Path: p})
		ga := s.start(encoding.OpGetACL, &encoding.GetACLRequest{Path: p})
		gc := s.start(encoding.OpGetChildren2, &encoding.GetChildren2Request{Path: p})
		var d encoding.GetDataResponse
		var a encoding.GetACLResponse
		var c encoding.GetChildren2Response
		var errs [3]error
		var hdrs [3]encoding.ReplyHeader
		hdrs[0], errs[0] = gd.wait(ctx, &d)
		hdrs[1], errs[1] = ga.wait(ctx, &a)
		hdrs[2], errs[2] = gc.wait(ctx, &c)
		for _, h := range hdrs {
			zxid = max(zxid, int64(h.Zxid))
		}
		switch {
		case slices.ContainsFunc(errs[:], isCode(encoding.ErrNoNode)):
			return nil, zxid, nil
		case slices.ContainsFunc(errs[:], isCode(encoding.ErrNoAuth)):
			return nil, zxid, fmt.Errorf("%s: %w: NoAuth with the credentials given", p, ErrUnreadable)
		}
		for _, err := range errs {
			if err != nil {
				return nil, zxid, fmt.Errorf("%s: %w", p, err)
			}
		}
		if d.Stat != a.Stat || a.Stat != c.Stat {
			continue
		}
		if err := checkACL(p, a.ACL); err != nil {
			return nil, zxid, err
		}
		slices.Sort(c.Children)
		return &zkdata.Node{Path: p, Data: d.Data, ACL: a.ACL, Stat: d.Stat, Children: c.Children}, zxid, nil
	}
	return nil, zxid, fmt.Errorf("%s: changed during each of %d reads", p, maxAttempts)
}

// checkACL refuses an ACL whose digests ZooKeeper redacted: getACL by a client without ADMIN
// on the node shows a digest id "user:hash" as "user:x" (FinalRequestProcessor), and a real
// hash is 28 characters of base64.
func checkACL(p string, acl []encoding.ACL) error {
	for _, a := range acl {
		if a.ID.Scheme == "digest" && strings.HasSuffix(a.ID.ID, ":x") {
			return fmt.Errorf("%s: %w: its ACL's digests are hidden from a client without ADMIN permission on it (%s)", p, ErrUnreadable, a.ID.ID)
		}
	}
	return nil
}

func isCode(code encoding.ErrCode) func(error) bool {
	return func(err error) bool {
		var c encoding.ErrCode
		return errors.As(err, &c) && c == code
	}
}

// readTree reads the subtree at root, cfg.Parallel nodes at a time. A node that a parent
// lists and that is gone when it is read is left out.
func readTree(ctx context.Context, cfg *Config, s *session, root string) (map[string]*zkdata.Node, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &walker{nodes: make(map[string]*zkdata.Node), queue: []string{root}}
	w.cond = sync.NewCond(&w.mu)
	var wg sync.WaitGroup
	for range cfg.parallel() {
		wg.Go(func() {
			for p, ok := w.next(); ok; p, ok = w.next() {
				n, zxid, err := readNode(ctx, s, p)
				w.done(n, zxid, err)
				if err != nil {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	return w.nodes, w.zxid, w.err
}

// walker is readTree's work queue: paths to read, and how many are being read, so that the
// workers stop when both are zero.
type walker struct {
	mu    sync.Mutex
	cond  *sync.Cond
	queue []string
	busy  int
	nodes map[string]*zkdata.Node
	zxid  int64
	err   error
}

// next returns a path to read, waiting while others are read that may add children; false
// once there is nothing left or a read failed.
func (w *walker) next() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) == 0 && w.busy > 0 && w.err == nil {
		w.cond.Wait()
	}
	if len(w.queue) == 0 || w.err != nil {
		return "", false
	}
	p := w.queue[len(w.queue)-1]
	w.queue = w.queue[:len(w.queue)-1]
	w.busy++
	return p, true
}

func (w *walker) done(n *zkdata.Node, zxid int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy--
	w.zxid = max(w.zxid, zxid)
	if err != nil && w.err == nil {
		w.err = err
	}
	if n != nil {
		w.nodes[n.Path] = n
		for _, c := range n.Children {
			w.queue = append(w.queue, path.Join(n.Path, c))
		}
	}
	w.cond.Broadcast()
}

// Sessions returns the sessions that own ephemerals among nodes, with the timeouts `cons` shows
// for those connected to one of cfg.Servers, and one line for each session whose timeout it
// could not learn (left 0) and why.
func Sessions(cfg Config, nodes map[string]*zkdata.Node) (map[int64]zkdata.Session, []string) {
	sessions := make(map[int64]zkdata.Session)
	for _, n := range nodes {
		if owner := int64(n.Stat.EphemeralOwner); owner != 0 {
			sessions[owner] = zkdata.Session{ID: owner}
		}
	}
	if len(sessions) == 0 {
		return sessions, nil
	}
	var notes []string
	timeouts := make(map[int64]int32)
	for _, addr := range cfg.Servers {
		out, err := fourLetterWord(addr, "cons", fourLetterTimeout)
		if err == nil && !strings.Contains(out, "sid=") && strings.Contains(out, "not in the whitelist") {
			err = errors.New(strings.TrimSpace(out))
		}
		if err != nil {
			cfg.log().Warn("cons: session timeouts unknown", zap.String("server", addr), zap.Error(err))
			notes = append(notes, fmt.Sprintf("cons on %s: %v", addr, err))
			continue
		}
		maps.Copy(timeouts, parseCons(out))
	}
	for id, s := range sessions {
		if to, ok := timeouts[id]; ok {
			s.Timeout = to
			sessions[id] = s
		} else {
			notes = append(notes, fmt.Sprintf("session %#x: timeout unknown (no connection to a server given)", id))
		}
	}
	slices.Sort(notes)
	return sessions, notes
}

// Connections returns the sessions `cons` lists on each of cfg.Servers, with the client
// address of their connection, and one line for each server whose `cons` could not be read
// and why.
func Connections(cfg Config) (map[int64]string, []string) {
	conns := make(map[int64]string)
	var notes []string
	for _, addr := range cfg.Servers {
		out, err := fourLetterWord(addr, "cons", fourLetterTimeout)
		if err == nil && strings.Contains(out, "not in the whitelist") {
			err = errors.New(strings.TrimSpace(out))
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("cons on %s: %v", addr, err))
			continue
		}
		maps.Copy(conns, parseConsClients(out))
	}
	return conns, notes
}

// consClient matches a connection with a session in `cons`'s answer, and its client address.
var consClient = regexp.MustCompile(`(?m)^\s*/?([^\s\[]+)\[\d+\]\([^)]*?\bsid=0x([0-9a-fA-F]+)\b`)

// parseConsClients returns the sessions `cons` lists, but for 0 (a connection without one yet),
// with their client addresses.
func parseConsClients(out string) map[int64]string {
	conns := make(map[int64]string)
	for _, m := range consClient.FindAllStringSubmatch(out, -1) {
		if id, err := strconv.ParseUint(m[2], 16, 64); err == nil && id != 0 {
			conns[int64(id)] = m[1]
		}
	}
	return conns
}

// consLine matches a connection in `cons`'s answer (NIOServerCnxn.dumpConnectionInfo):
// "/host:port[1](queued=0,...,sid=0x1000a2b3c4d0000,...,to=30000,...)".
var consLine = regexp.MustCompile(`sid=0x([0-9a-fA-F]+)\b[^)]*?\bto=(\d+)`)

// parseCons returns the session timeouts `cons` lists, by session id.
func parseCons(out string) map[int64]int32 {
	timeouts := make(map[int64]int32)
	for _, m := range consLine.FindAllStringSubmatch(out, -1) {
		id, err1 := strconv.ParseUint(m[1], 16, 64)
		to, err2 := strconv.ParseInt(m[2], 10, 32)
		if err1 == nil && err2 == nil {
			timeouts[int64(id)] = int32(to)
		}
	}
	return timeouts
}

// fourLetterWord sends a four-letter word to addr and returns the answer; ZooKeeper closes the
// connection after it.
func fourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	return string(out), err
}

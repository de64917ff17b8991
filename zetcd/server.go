package zetcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// DataDirs are the store's directories in ZooKeeper's terms. The Server knows no store's
// layout: the caller that does fills them in (for the embedded etcd, embedetcd.Dirs).
type DataDirs struct {
	Snap string // ZooKeeper's dataDir: snapshots (for etcd, also its database)
	Log  string // ZooKeeper's dataLogDir: the write-ahead log
}

// Config configures a Server. Every zero field takes the default documented next to it.
type Config struct {
	MinSessionTimeout time.Duration // default 4s (ZooKeeper's 2×tickTime with tickTime 2000)
	MaxSessionTimeout time.Duration // default 40s (20×tickTime); raised to MinSessionTimeout if below it
	MaxFrameBytes     int           // largest request frame accepted; default encoding.DefaultMaxFrameBytes
	Logger            *zap.Logger   // default zap.NewNop()
	Version           string        // shown by the srvr four-letter word; default defaultVersion

	// FourLetterWords are the four-letter words answered (ZooKeeper's 4lw.commands.whitelist);
	// nil means DefaultFourLetterWords, a "*" entry means every word. srvr is always answered.
	FourLetterWords []string
	// DataDirs are the directories conf reports and dirs measures; zero for a store whose
	// files this process cannot see (an external etcd).
	DataDirs DataDirs
	// Stats, if set, supplies the tree, session and watch numbers of the four-letter words and
	// metrics; default: the Backend, or a Backend beneath its decorators (Unwrap), if it
	// implements StatsSource.
	Stats StatsSource
	// Metrics, if set, receive the server's connection, byte, queue and watch gauges
	// (registered on Metrics.Registerer by NewServer).
	Metrics *Metrics

	// MaxConnQueuedBytes bounds the bytes one connection holds for its client (requests read,
	// replies and watch events not yet written); default DefaultMaxConnQueuedBytes. Past it
	// the connection stops executing and reading requests until its client reads
	// (backpressure.go).
	MaxConnQueuedBytes int64
	// MaxQueuedBytes bounds those bytes over all connections; default DefaultMaxQueuedBytes.
	MaxQueuedBytes int64
	// MaxClientCnxns bounds the connections one client IP address holds at once (ZooKeeper's
	// maxClientCnxns, four-letter-word connections included): one more is closed as soon as it
	// is accepted. 0, the default, is no limit (ZooKeeper's default is 60).
	MaxClientCnxns int

	// Auth turns on SASL and enforced authentication (sasl.go); zero: neither.
	Auth AuthConfig

	// ReadOnlyMode is ZooKeeper's readonlymode.enabled: while the backend (a ReadOnlyBackend)
	// is cut off from its store, clients that ask for it get read-only sessions, and the
	// others are refused (readonly.go).
	ReadOnlyMode bool
}

const (
	defaultMinSessionTimeout = 4 * time.Second
	defaultMaxSessionTimeout = 40 * time.Second
	defaultVersion           = "3.9.0-zetcd-dev"

	// handshakeTimeout bounds reading the first frame of a connection and writing the answer
	// to it (ConnectResponse or four-letter-word output).
	handshakeTimeout = 10 * time.Second
	// connectTimeout bounds Backend.Connect.
	connectTimeout = 10 * time.Second
	// lifecycleTimeout bounds Session.Close and Session.Expire.
	lifecycleTimeout = 10 * time.Second
	// lingerTimeout and lingerMaxBytes bound how long, and how much, the server keeps reading
	// (and discarding) after it half-closed a connection it answered before closing (4lw,
	// closeSession, Unimplemented, expired handshake). Closing a socket with unread input makes
	// the kernel send RST, which can destroy the answer before the client has read it.
	lingerTimeout  = 500 * time.Millisecond
	lingerMaxBytes = 1 << 20
	// maxOutstanding is the reader→executor queue length per connection: the reader stops
	// reading the socket when this many requests wait (as at ZooKeeper's
	// globalOutstandingLimit; the bytes they hold are bounded too, backpressure.go). The queue
	// grows with what waits and is dropped when the executor finds it empty (execQueue).
	maxOutstanding = 128
	// readBufferSize is the size of the read buffer a connection holds while it reads
	// requests (frameReader; none between frames): small requests arrive several at a time, and
	// a frame up to this size is decoded in place; a larger one is read into its own buffer.
	readBufferSize = 4 << 10
)

func (cfg Config) withDefaults() Config {
	if cfg.MinSessionTimeout <= 0 {
		cfg.MinSessionTimeout = defaultMinSessionTimeout
	}
	if cfg.MaxSessionTimeout <= 0 {
		cfg.MaxSessionTimeout = defaultMaxSessionTimeout
	}
	if cfg.MaxSessionTimeout < cfg.MinSessionTimeout {
		cfg.MaxSessionTimeout = cfg.MinSessionTimeout
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = encoding.DefaultMaxFrameBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Version == "" {
		cfg.Version = defaultVersion
	}
	if cfg.MaxConnQueuedBytes <= 0 {
		cfg.MaxConnQueuedBytes = DefaultMaxConnQueuedBytes
	}
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	return cfg
}

// Server serves the ZooKeeper client protocol on any number of listeners, opening and resuming
// sessions through a Backend. See the package documentation for the goroutines it runs.
type Server struct {
	backend Backend
	cfg     Config // defaults applied; read-only
	log     *zap.Logger
	connLog *zap.Logger // log, reporting the caller of a connLog method

	// ctx is the parent of every context the server creates (connections, Connect, Close,
	// Expire); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	stats    serverStats
	sessions *sessionTable
	started  time.Time // for zk_uptime
	// traceMask is ZooKeeper's trace mask (ZooTrace): gtmk and get_trace_mask report it,
	// set_trace_mask sets it; nothing else reads it.
	traceMask atomic.Int64
	// statsSrc is the backend's StatsSource (statsSourceOf), nil if it has none; fourLetter is
	// the set of words answered. Both read-only.
	statsSrc   StatsSource
	fourLetter map[string]bool
	// readOnly is the backend's ReadOnlyBackend with Config.ReadOnlyMode, else nil; read-only.
	readOnly ReadOnlyBackend
	// handoff, if set, serves new connections in place of the server (SetHandoff).
	handoff atomic.Pointer[Handoff]

	// mu protects closed, draining, listeners, conns and connsByIP. connWG and serveWG are only
	// Added under mu while !closed and !draining, so that Close and Shutdown can Wait on them.
	mu        sync.Mutex
	closed    bool
	draining  bool // Shutdown has begun: no new connections, open ones drain (drain.go)
	listeners map[net.Listener]struct{}
	conns     map[*clientConn]struct{}
	connsByIP map[string]int // open connections by client address, when MaxClientCnxns is set
	connWG    sync.WaitGroup // one per connection, from startConn to endConn
	serveWG   sync.WaitGroup // one per running Serve call
	closeDone chan struct{}  // closed when the first Close has finished
}

// NewServer returns a Server that opens sessions through b. Call Serve to accept connections.
func NewServer(b Backend, cfg Config) *Server {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		backend:   b,
		cfg:       cfg,
		log:       cfg.Logger,
		connLog:   cfg.Logger.WithOptions(zap.AddCallerSkip(2)),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*clientConn]struct{}),
		connsByIP: make(map[string]int),
		closeDone: make(chan struct{}),
	}
	s.stats.latMin.Store(math.MaxInt64)
	s.stats.respMin.Store(math.MaxInt64)
	s.sessions = newSessionTable(ctx, cfg.Logger, s.storeReachable)
	s.started = time.Now()
	s.traceMask.Store(defaultTraceMask)
	s.statsSrc, _ = statsSourceOf(cfg, b)
	if cfg.ReadOnlyMode {
		s.readOnly = readOnlyBackendOf(b)
	}
	s.fourLetter = fourLetterWhitelist(cfg.FourLetterWords)
	if cfg.Metrics != nil {
		if err := cfg.Metrics.registerServer(s); err != nil {
			s.log.Warn("server metrics not registered", zap.Error(err))
		}
	}
	return s
}

// Serve accepts connections on ln until ln is closed or Close or Shutdown is called. It returns
// nil after Close or Shutdown (also when called after them; ln is then closed), and otherwise
// the error that stopped accepting. Serve may be called for several listeners at once.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed || s.draining {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.serveWG.Add(1)
	s.mu.Unlock()
	defer s.serveWG.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() || s.isDraining() {
				return nil
			}
			if !isTemporaryAcceptError(err) {
				return fmt.Errorf("zetcd: accept on %v: %w", ln.Addr(), err)
			}
			// Out of file descriptors and the like: wait and retry, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", zap.Stringer("listener", ln.Addr()),
				zap.Duration("backoff", backoff), zap.Error(err))
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		s.startConn(nc)
	}
}

// clientIP is the address of nc's client without its port (the whole remote address when it
// has none, as on a unix socket).
func clientIP(nc net.Conn) string {
	addr := nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

func isTemporaryAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS,
		syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// startConn registers nc and starts the goroutine that owns it. After Close, or past
// MaxClientCnxns, it just closes nc.
func (s *Server) startConn(nc net.Conn) {
	c := newClientConn(s, nc)
	if s.cfg.MaxClientCnxns > 0 {
		c.ip = clientIP(nc)
	}
	s.mu.Lock()
	if s.closed || s.draining {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if limit := s.cfg.MaxClientCnxns; limit > 0 {
		if s.connsByIP[c.ip] >= limit {
			s.mu.Unlock()
			s.stats.refusedConns.Add(1)
			s.log.Warn("too many connections from one address; closing the new one",
				zap.String("remote", c.ip), zap.Int("maxClientCnxns", limit))
			nc.Close()
			return
		}
		s.connsByIP[c.ip]++
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	go s.serveConn(c)
}

// serveConn runs in the goroutine that accepted c: the handshake, then the reader (readConn).
func (s *Server) serveConn(c *clientConn) {
	if c.handshake() {
		s.readConn(c)
		return
	}
	s.endConn(c, false)
}

// readConn runs c's reader in this goroutine until it stops, and then ends the connection; or
// until the connection is idle, and then moves the wait to a new goroutine (awaitIdle).
func (s *Server) readConn(c *clientConn) {
	if c.runReader() {
		go s.awaitIdle(c)
		return
	}
	s.endConn(c, true)
}

// awaitIdle is the goroutine of an idle connection (runReader says why it is new): it waits
// for the client's next bytes, its deadline armed, with nothing else on its stack, and then
// serves on (readConn). Keep it that small.
func (s *Server) awaitIdle(c *clientConn) {
	if err := c.readPrefix(); err != nil {
		c.readFailed(err)
		s.endConn(c, true)
		return
	}
	s.readConn(c)
}

// endConn runs in the connection's last goroutine, which owns c: whatever happens, it closes
// the socket, ends or detaches the session (if served: a session was open), and unregisters c.
// A connection is unregistered before its socket closes: closing may linger for a moment after
// the answer (closeSocket), and a connection that has answered its four-letter word is no
// longer one of the server's (stat, cons and mntr count only live ones, as ZooKeeper's).
func (s *Server) endConn(c *clientConn, served bool) {
	defer s.connWG.Done()
	defer close(c.done)
	defer c.closeSocket()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		if s.cfg.MaxClientCnxns > 0 {
			if s.connsByIP[c.ip]--; s.connsByIP[c.ip] <= 0 {
				delete(s.connsByIP, c.ip)
			}
		}
		s.mu.Unlock()
	}()
	defer c.recoverPanic("connection")
	if served {
		c.teardown()
	}
}

// snapshotLocked copies the listeners and connections out of their sets; s.mu must be held.
func (s *Server) snapshotLocked() ([]net.Listener, []*clientConn) {
	lns := make([]net.Listener, 0, len(s.listeners))
	for ln := range s.listeners {
		lns = append(lns, ln)
	}
	conns := make([]*clientConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return lns, conns
}

// Close stops every listener, closes every connection and waits for all connection goroutines
// and Serve calls to return. Sessions are detached, not ended: their clients resume them on
// another zetcd (or on this one, if it is restarted before they expire). Pending expiry timers
// are stopped. Close is idempotent; later calls wait for the first to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.closeDone
		return nil
	}
	s.closed = true
	lns, conns := s.snapshotLocked()
	s.mu.Unlock()

	s.cancel()
	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("zetcd: close listener %v: %w", ln.Addr(), err))
		}
	}
	for _, c := range conns {
		c.setEnd(endServerClose)
		c.shutdown()
	}
	s.connWG.Wait()
	s.serveWG.Wait()
	s.sessions.close()
	close(s.closeDone)
	return errors.Join(errs...)
}

// negotiateTimeout clamps a client's requested session timeout (ms) to [Min, Max].
func (s *Server) negotiateTimeout(ms int32) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	return min(max(d, s.cfg.MinSessionTimeout), s.cfg.MaxSessionTimeout)
}

// serverStats are the counters the four-letter words and metrics report. All fields are
// atomics updated by connection goroutines.
type serverStats struct {
	received    atomic.Int64 // frames read from clients, including ConnectRequests and pings
	sent        atomic.Int64 // frames written to clients, including ConnectResponses
	outstanding atomic.Int64 // requests read but not yet executed, over all connections
	queuedBytes atomic.Int64 // bytes held for clients, over all connections (queueBudget)
	// backpressured counts the times a connection waited for room (backpressure.go).
	backpressured atomic.Int64
	maxZxid       atomic.Int64 // highest zxid any reply header carried

	bytesReceived srstCounter  // bytes of the frames in received, length prefixes included
	bytesSent     srstCounter  // bytes of the frames in sent
	respLast      atomic.Int64 // size of the last reply frame written
	respMin       atomic.Int64 // smallest reply frame; math.MaxInt64 until the first
	respMax       atomic.Int64 // largest reply frame
	authFailed    atomic.Int64 // replies with AuthFailed
	refusedConns  srstCounter  // connections closed on accept past MaxClientCnxns
	handshakes    srstCounter  // ConnectRequests read

	// Latencies in whole milliseconds (read to reply queued), as ZooKeeper's ServerStats
	// records them: its average is one of whole milliseconds too, never above the maximum.
	latCount atomic.Int64 // requests executed
	latTotal atomic.Int64 // their summed latency, ms
	latMin   atomic.Int64 // ms; math.MaxInt64 until the first request
	latMax   atomic.Int64 // ms
}

func (st *serverStats) observeLatency(d time.Duration) {
	ms := d.Milliseconds()
	st.latCount.Add(1)
	st.latTotal.Add(ms)
	storeMin(&st.latMin, ms)
	storeMax(&st.latMax, ms)
}

func (st *serverStats) observeZxid(z encoding.Zxid) {
	for {
		cur := st.maxZxid.Load()
		if int64(z) <= cur || st.maxZxid.CompareAndSwap(cur, int64(z)) {
			return
		}
	}
}

// latency returns min/avg/max latency in milliseconds, all zero before the first request.
func (st *serverStats) latency() (minMs int64, avgMs float64, maxMs int64) {
	n := st.latCount.Load()
	if n == 0 {
		return 0, 0, 0
	}
	return st.latMin.Load(), float64(st.latTotal.Load()) / float64(n), st.latMax.Load()
}

func (s *Server) numConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// storeReachable reports whether the backend answers for its store now: its StatsSource's Stats
// does not fail with ErrNotServing (etcd out of reach, its watch silent). A backend without a
// StatsSource is taken as reachable.
func (s *Server) storeReachable(ctx context.Context) bool {
	if s.statsSrc == nil {
		return true
	}
	_, err := s.statsSrc.Stats(ctx)
	return !errors.Is(err, ErrNotServing)
}

// Package memberguard keeps an etcd client's requests off the members that stop answering.
//
// The etcd client spreads its requests and streams over every member it is given. A member
// that stops answering without closing its connections (a frozen process, a partition that
// keeps the TCP connection up, a member cut off from its cluster's leader, a disk that stalls
// its log or its apply) holds whatever was sent to it, and whatever the client goes on sending
// it, until gRPC's keepalive gives the connection up: 13 s at the least, as gRPC pings no more
// often than every 10 s, and never while the member still answers pings. With three members
// that is a third of the requests, and in zetcd every write of the process waits behind a
// committer's transaction held there.
//
// Guard.Run reads a key from each member, linearizably and on a connection of its own, a few
// times a Silence: such a read needs the member to reach its leader and to have applied what
// the leader committed, as the client's requests do. A member that has not answered for a Silence,
// while another member does, is left out: the client's endpoints become the others, and the
// client's connections to it are closed (Dialer.Sever), which fails what was in flight there at
// once. The etcd client retries what is safe to retry on another member; the rest fails as a
// lost connection would, its outcome unknown. What another member holds for the one left out
// is not failed by that (a follower forwards writes to its leader, and waits for etcd's request
// timeout, 7 s with a 1 s election timeout, if the leader never answers): OnLeave tells the
// client's owner, which may fail its own requests that have waited too long. A member left out
// is taken back once it answers twice in a row.
package memberguard

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Config is what a Guard guards.
type Config struct {
	// Client is the client whose endpoints the Guard sets. Its connections must be dialed through
	// Dialer (clientv3.Config.DialOptions: grpc.WithContextDialer(Dialer.Dial)).
	Client *clientv3.Client
	Dialer *Dialer
	// Endpoints are the members, as the client was given them; the Guard keeps their order.
	Endpoints []string
	// ProbeKey is the key the probes read (its count only): one the client may read.
	ProbeKey string
	// Silence is how long a member may go without answering, while another answers, before it
	// is left out. Each member is asked every Silence/4, and given Silence/2 to answer.
	Silence time.Duration
	Logger  *zap.Logger
}

// readmitAnswers is how many answers in a row take a member left out back.
const readmitAnswers = 2

// member is one etcd member as the Guard sees it. Its fields belong to Run's goroutine (the
// probes write theirs before probeAll returns).
type member struct {
	endpoint string
	addr     string           // the address the client dials for it (Dialer's key)
	conn     *grpc.ClientConn // the probes' own connection
	heard    time.Time        // when it last answered
	answers  int              // its answers in a row
	out      bool             // left out of the client's endpoints
}

// Guard keeps a client off the members that stop answering (Run), and tells which it left out
// (LeftOut).
type Guard struct {
	cfg Config

	mu      sync.Mutex
	leftOut []string // the members left out now: their out flags, copied for LeftOut
	leaves  int64    // how many times a member was left out
	onLeave func()   // OnLeave's
}

// OnLeave makes f be called, in Run's goroutine, each time members are left out, once the
// client's connections to them are closed.
func (g *Guard) OnLeave(f func()) {
	g.mu.Lock()
	g.onLeave = f
	g.mu.Unlock()
}

// New returns a Guard of cfg.Client; Run starts it.
func New(cfg Config) *Guard { return &Guard{cfg: cfg} }

// LeftOut returns the endpoints left out now, and how many times one was left out in all.
func (g *Guard) LeftOut() (endpoints []string, leaves int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.leftOut), g.leaves
}

// Run guards the client until ctx ends.
func (g *Guard) Run(ctx context.Context) {
	cfg := g.cfg
	ms := make([]*member, 0, len(cfg.Endpoints))
	defer func() {
		for _, m := range ms {
			m.conn.Close()
		}
	}()
	now := time.Now()
	for _, ep := range cfg.Endpoints {
		conn, err := cfg.Client.Dial(ep)
		if err != nil {
			cfg.Logger.Warn("etcd member guard: cannot dial a member; not guarding", zap.String("endpoint", ep), zap.Error(err))
			return
		}
		// Heard at the start: a member gets a Silence to answer its first probe.
		ms = append(ms, &member{endpoint: ep, addr: endpointAddr(ep), conn: conn, heard: now})
	}
	t := time.NewTicker(cfg.Silence / 4)
	defer t.Stop()
	for {
		probeAll(ctx, ms, cfg.ProbeKey, cfg.Silence/2)
		if ctx.Err() != nil {
			return
		}
		g.steer(ms)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// steer gives the client the endpoints decide chooses, if they changed, and closes the
// client's connections to the members it left out.
func (g *Guard) steer(ms []*member) {
	cfg := g.cfg
	in, left, back := decide(ms, time.Now(), cfg.Silence)
	if len(left)+len(back) == 0 {
		return
	}
	g.mu.Lock()
	g.leftOut = g.leftOut[:0]
	for _, m := range ms {
		if m.out {
			g.leftOut = append(g.leftOut, m.endpoint)
		}
	}
	g.leaves += int64(len(left))
	onLeave := g.onLeave
	g.mu.Unlock()
	cfg.Client.SetEndpoints(in...)
	for _, m := range left {
		n := cfg.Dialer.Sever(m.addr)
		cfg.Logger.Warn("etcd member stopped answering; its requests go to the other members",
			zap.String("endpoint", m.endpoint), zap.Duration("silent", time.Since(m.heard).Round(time.Millisecond)),
			zap.Int("connectionsClosed", n), zap.Strings("endpoints", in))
	}
	if len(left) > 0 && onLeave != nil {
		onLeave()
	}
	for _, m := range back {
		cfg.Logger.Info("etcd member answers again", zap.String("endpoint", m.endpoint), zap.Strings("endpoints", in))
	}
}

// probeAll reads key from every member at once, each given wait to answer, and records the
// answers.
func probeAll(ctx context.Context, ms []*member, key string, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() { m.probe(ctx, key) })
	}
	wg.Wait()
}

// probe reads key from m once.
func (m *member) probe(ctx context.Context, key string) {
	if m.answers == 0 {
		// A connection that failed waits out gRPC's backoff before it tries again, up to two
		// minutes: a member back from a long outage would wait that long to be taken back.
		m.conn.ResetConnectBackoff()
	}
	// Linearizable (not Serializable): a member cut off from its leader, or behind in
	// applying, does not answer it, as during an election no member does.
	_, err := pb.NewKVClient(m.conn).Range(ctx, &pb.RangeRequest{Key: []byte(key), CountOnly: true})
	if err != nil {
		m.answers = 0
		return
	}
	m.heard = time.Now()
	m.answers++
}

// decide leaves out the members silent for silence while another member in the endpoints has
// answered within it, and takes back those left out that answered readmitAnswers times in a
// row. It returns the endpoints to give the client, and the members it left out and took back.
func decide(ms []*member, now time.Time, silence time.Duration) (in []string, left, back []*member) {
	heard := func(m *member) bool { return now.Sub(m.heard) < silence }
	for _, m := range ms {
		switch {
		case m.out && m.answers >= readmitAnswers:
			m.out = false
			back = append(back, m)
		case !m.out && !heard(m) && anotherHeard(ms, m, heard):
			m.out = true
			left = append(left, m)
		}
	}
	for _, m := range ms {
		if !m.out {
			in = append(in, m.endpoint)
		}
	}
	return in, left, back
}

// anotherHeard reports whether a member other than m, in the endpoints, has been heard.
func anotherHeard(ms []*member, m *member, heard func(*member) bool) bool {
	for _, o := range ms {
		if o != m && !o.out && heard(o) {
			return true
		}
	}
	return false
}

// endpointAddr is the address the etcd client dials for endpoint ep, as its resolver writes
// it (etcd's client/v3 internal/endpoint): host:port for http(s) URLs and plain addresses,
// "unix:path" or "unix:///absolute-path" for unix sockets.
func endpointAddr(ep string) string {
	for _, scheme := range []string{"unix", "unixs"} {
		if rest, ok := strings.CutPrefix(ep, scheme+"://"); ok {
			if strings.HasPrefix(rest, "/") {
				return "unix://" + rest
			}
			return "unix:" + rest
		}
		if rest, ok := strings.CutPrefix(ep, scheme+":"); ok {
			return "unix:" + rest
		}
	}
	if strings.Contains(ep, "://") {
		if u, err := url.Parse(ep); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			return u.Host
		}
	}
	return ep
}

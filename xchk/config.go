package xchk

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// Answer says whose answer a cross-checked client receives.
type Answer string

const (
	// AnswerZetcd (the default) serves clients from zetcd; ZooKeeper only checks it.
	AnswerZetcd Answer = "zetcd"
	// AnswerZooKeeper serves clients ZooKeeper's answers and watch events (translated into the
	// zxids and session ids of the client's zetcd session, see the package documentation); zetcd
	// runs in its shadow. Where ZooKeeper does not answer, zetcd's answer is used.
	AnswerZooKeeper Answer = "zookeeper"
)

// ParseAnswer parses the value of --oracle-answer.
func ParseAnswer(s string) (Answer, error) {
	switch a := Answer(s); a {
	case AnswerZetcd, AnswerZooKeeper:
		return a, nil
	case "":
		return AnswerZetcd, nil
	}
	return "", fmt.Errorf("xchk: answer %q: want %q or %q", s, AnswerZetcd, AnswerZooKeeper)
}

// Config configures a cross-checking Backend. Zero fields take the documented defaults.
type Config struct {
	// OracleAddr is the real ZooKeeper's client address, host:port. Required.
	OracleAddr string
	// Answer chooses whose answer the client gets; default AnswerZetcd.
	Answer Answer
	// FailFast closes a client's connection at the first difference found on its session
	// (the Handler call returns a non-ErrCode error, *MismatchError). A difference in watch
	// events, found after the bounded wait, closes the connection at the session's next
	// request. Oracle failures never close a connection. For tests.
	FailFast bool
	// OracleTimeout bounds the wait for ZooKeeper: dialling a twin session, each reply, and
	// ending a twin. Default 2s. A request the oracle does not answer in time is served from
	// zetcd and reported under field "oracle"; its session is no longer cross-checked.
	OracleTimeout time.Duration
	// EventWait is how long a watch event seen on one side waits for its pair (same type,
	// state and path) on the other before it is reported. Default 2s.
	EventWait time.Duration
	// Logger receives one line per difference. Default zap.NewNop().
	Logger *zap.Logger
	// Registerer is where the metrics are registered. Default prometheus.DefaultRegisterer.
	// Metrics already registered there (another Backend) are shared.
	Registerer prometheus.Registerer

	// Mutate exists for tests only: it is applied to zetcd's answer to every Handler call
	// before the comparison (resp is nil for header-only replies), so a test can introduce a
	// divergence and see it reported. Its result is what the client receives when Answer is
	// zetcd. Leave nil in production.
	Mutate func(op encoding.Op, resp encoding.Record, err error) (encoding.Record, error)
}

const (
	defaultOracleTimeout = 2 * time.Second
	defaultEventWait     = 2 * time.Second
)

func (cfg Config) withDefaults() (Config, error) {
	if cfg.OracleAddr == "" {
		return cfg, errors.New("xchk: Config.OracleAddr is required")
	}
	a, err := ParseAnswer(string(cfg.Answer))
	if err != nil {
		return cfg, err
	}
	cfg.Answer = a
	if cfg.OracleTimeout <= 0 {
		cfg.OracleTimeout = defaultOracleTimeout
	}
	if cfg.EventWait <= 0 {
		cfg.EventWait = defaultEventWait
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.DefaultRegisterer
	}
	return cfg, nil
}

// FieldOracle is the field label under which requests and sessions that could not be
// cross-checked (oracle down, slow, or without a twin session) are counted.
const FieldOracle = "oracle"

// metrics are the Prometheus collectors of a Backend.
type metrics struct {
	mismatches *prometheus.CounterVec // {op, field}
	requests   *prometheus.CounterVec // {op}
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zetcd_xchk_mismatches_total",
			Help: "Differences between zetcd's and ZooKeeper's answers found by the cross-check, by opcode and field; field \"oracle\" counts what could not be checked.",
		}, []string{"op", "field"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zetcd_xchk_requests_total",
			Help: "Requests seen by the cross-check, by opcode.",
		}, []string{"op"}),
	}
	var err error
	if m.mismatches, err = register(reg, m.mismatches); err != nil {
		return m, err
	}
	if m.requests, err = register(reg, m.requests); err != nil {
		return m, err
	}
	return m, nil
}

// register registers c, or returns the identical collector already registered.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("xchk: register metrics: %w", err)
	}
	return c, nil
}

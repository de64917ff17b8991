package zkrelay

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

const (
	// defaultDialTimeout bounds connecting to one ZooKeeper server.
	defaultDialTimeout = 3 * time.Second
	// handshakeTimeout bounds reading the client's ConnectRequest, and ZooKeeper's answer to it.
	handshakeTimeout = 10 * time.Second
	// maxServerFrame bounds a frame from ZooKeeper: a reply holds up to jute.maxbuffer of data,
	// and a getChildren of a node with very many children holds more.
	maxServerFrame = 64 << 20
	// bufferSize is the read and write buffer of each direction of a relayed connection.
	bufferSize = 16 << 10
)

// Config configures a Relay. Every zero field takes the default documented next to it.
type Config struct {
	// Servers are ZooKeeper's client addresses (host:port). Each connection tries them in a
	// random order, as a ZooKeeper client does, until one answers the ConnectRequest.
	Servers []string
	// DialTimeout bounds connecting to one server; default 3s.
	DialTimeout time.Duration
	// MaxFrameBytes bounds a frame from a client; default encoding.DefaultMaxFrameBytes
	// (ZooKeeper's jute.maxbuffer). A longer frame closes the connection, as ZooKeeper does.
	MaxFrameBytes int
	// TLS, if set, is the TLS configuration of the connections to ZooKeeper (its
	// secureClientPort); nil: plain TCP. Its ServerName, if empty, is each server's host. A
	// client certificate in it is the relay's, not the client's: ZooKeeper's
	// X509AuthenticationProvider then gives every relayed session the relay's identity.
	TLS *tls.Config
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Relay relays client connections to ZooKeeper and records their sessions. Its methods may be
// called from any goroutine.
type Relay struct {
	cfg Config
	log *zap.Logger

	mu    sync.Mutex
	conns map[*relayConn]struct{}
	// handshaking are the client connections not yet relayed: Serve is reading their
	// ConnectRequest or waiting for ZooKeeper's answer.
	handshaking map[net.Conn]struct{}
	sessions    map[encoding.SessionID]*record
}

// New returns a Relay to the servers of cfg.
func New(cfg Config) *Relay {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = encoding.DefaultMaxFrameBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Relay{
		cfg:         cfg,
		log:         cfg.Logger,
		conns:       make(map[*relayConn]struct{}),
		handshaking: make(map[net.Conn]struct{}),
		sessions:    make(map[encoding.SessionID]*record),
	}
}

// relayConn is one relayed connection: the client's and the ZooKeeper server's sockets, and the
// requests sent and not yet answered that change the session's record.
type relayConn struct {
	client, server net.Conn
	addr           string // the ZooKeeper server's
	id             encoding.SessionID
	closeOnce      sync.Once
	// pending are the requests relayed and not yet answered that change the session's
	// record, by xid; Relay.mu guards it. id is set by open, before the pumps start.
	pending map[encoding.Xid]request
}

// close closes both sides; the goroutines copying between them then end.
func (c *relayConn) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

// Serve relays client, a connection whose first frame is a ConnectRequest, to a ZooKeeper
// server, and returns when the connection has ended; client is closed then. A connection that
// starts with a four-letter word instead has it answered by a ZooKeeper server. Ending ctx, or
// CloseAll, closes it. The error says why the relay could not start (a bad first frame, no
// ZooKeeper server answering); a relayed connection that either side closes returns nil.
func (r *Relay) Serve(ctx context.Context, client net.Conn) error {
	defer client.Close()
	r.mu.Lock()
	r.handshaking[client] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.handshaking, client)
		r.mu.Unlock()
	}()
	cr := bufio.NewReaderSize(client, bufferSize)
	client.SetReadDeadline(time.Now().Add(handshakeTimeout))
	if word, err := cr.Peek(4); err == nil && isFourLetterWord(word) {
		return r.fourLetterWord(ctx, client, cr)
	}
	frame, err := encoding.ReadFrame(cr, nil, r.cfg.MaxFrameBytes)
	if err != nil {
		r.log.Debug("no connect request; closing the connection", zap.Stringer("remote", client.RemoteAddr()), zap.Error(err))
		return fmt.Errorf("zkrelay: read connect request: %w", err)
	}
	client.SetReadDeadline(time.Time{})
	var req encoding.ConnectRequest
	if err := encoding.DecodeRecord(frame, &req); err != nil {
		r.log.Warn("bad connect request; closing the connection", zap.Stringer("remote", client.RemoteAddr()), zap.Error(err))
		return fmt.Errorf("zkrelay: decode connect request: %w", err)
	}
	c, sr, resp, err := r.connect(ctx, client, frame)
	if err != nil {
		r.log.Warn("no ZooKeeper server answered; closing the client's connection",
			zap.Stringer("remote", client.RemoteAddr()), zap.Stringer("session", req.SessionID), zap.Error(err))
		return err
	}
	r.open(c, &req, resp)
	defer r.end(c)
	r.log.Debug("relaying a session", zap.Stringer("remote", client.RemoteAddr()), zap.Stringer("session", resp.SessionID),
		zap.String("zookeeper", c.addr), zap.Int32("timeout", resp.TimeOut))
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.pump(c, sr, client, maxServerFrame, r.noteReply, "ZooKeeper", "client")
	}()
	r.pump(c, cr, c.server, r.cfg.MaxFrameBytes, r.noteRequest, "client", "ZooKeeper")
	<-done
	return nil
}

// connect sends the client's ConnectRequest frame to the servers in a random order until one
// answers it, and relays the answer to the client. A server that closes the connection
// without answering (one behind the client's last zxid, or one that refuses connections) is
// passed over, as a client passes over it.
func (r *Relay) connect(ctx context.Context, client net.Conn, frame []byte) (*relayConn, *bufio.Reader, encoding.ConnectResponse, error) {
	var errs []error
	for _, i := range rand.Perm(len(r.cfg.Servers)) {
		addr := r.cfg.Servers[i]
		server, sr, answer, err := r.handshake(ctx, addr, frame)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		var resp encoding.ConnectResponse
		if err := encoding.DecodeRecord(answer, &resp); err != nil {
			server.Close()
			errs = append(errs, fmt.Errorf("%s: decode connect response: %w", addr, err))
			continue
		}
		client.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		_, err = client.Write(appendFrame(nil, answer))
		client.SetWriteDeadline(time.Time{})
		if err != nil {
			server.Close()
			return nil, nil, resp, fmt.Errorf("zkrelay: write connect response: %w", err)
		}
		c := &relayConn{client: client, server: server, addr: addr, pending: make(map[encoding.Xid]request)}
		return c, sr, resp, nil
	}
	if len(errs) == 0 {
		return nil, nil, encoding.ConnectResponse{}, errors.New("zkrelay: no ZooKeeper server configured")
	}
	return nil, nil, encoding.ConnectResponse{}, fmt.Errorf("zkrelay: connect: %w", errors.Join(errs...))
}

// dial connects to the ZooKeeper server at addr, over TLS if the Config says so.
func (r *Relay) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d interface {
		DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	} = &net.Dialer{Timeout: r.cfg.DialTimeout}
	if r.cfg.TLS != nil {
		d = &tls.Dialer{NetDialer: &net.Dialer{Timeout: r.cfg.DialTimeout}, Config: r.cfg.TLS}
	}
	return d.DialContext(ctx, "tcp", addr)
}

// handshake dials addr, sends the ConnectRequest frame and returns ZooKeeper's answer frame.
func (r *Relay) handshake(ctx context.Context, addr string, frame []byte) (net.Conn, *bufio.Reader, []byte, error) {
	server, err := r.dial(ctx, addr)
	if err != nil {
		return nil, nil, nil, err
	}
	server.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := server.Write(appendFrame(nil, frame)); err != nil {
		server.Close()
		return nil, nil, nil, fmt.Errorf("write connect request: %w", err)
	}
	sr := bufio.NewReaderSize(server, bufferSize)
	answer, err := encoding.ReadFrame(sr, nil, maxServerFrame)
	if err != nil {
		server.Close()
		return nil, nil, nil, fmt.Errorf("read connect response: %w", err)
	}
	server.SetDeadline(time.Time{})
	return server, sr, answer, nil
}

// isFourLetterWord reports whether a connection's first four bytes are a four-letter word
// (ruok, srvr, mntr ...): lower-case letters, which as a frame's length would be over a
// gigabyte.
func isFourLetterWord(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// fourLetterWord relays a four-letter word to the first ZooKeeper server that takes the
// connection, and its answer back until the server closes, as ZooKeeper does once it has
// answered; bytes the client sends after the word (stmk's mask) go to the server too. The
// whole exchange has handshakeTimeout.
func (r *Relay) fourLetterWord(ctx context.Context, client net.Conn, cr *bufio.Reader) error {
	var errs []error
	for _, i := range rand.Perm(len(r.cfg.Servers)) {
		addr := r.cfg.Servers[i]
		server, err := r.dial(ctx, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		defer server.Close()
		deadline := time.Now().Add(handshakeTimeout)
		server.SetDeadline(deadline)
		client.SetDeadline(deadline)
		go io.Copy(server, cr)
		_, err = io.Copy(client, server)
		return err
	}
	return fmt.Errorf("zkrelay: four-letter word: %w", errors.Join(errs...))
}

// appendFrame appends payload to b as one frame: its length, then its bytes.
func appendFrame(b, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// pump copies frames from src, the from side, to dst until either side fails, letting note
// see each frame before it goes on; then it closes both sides. max bounds a frame from src.
func (r *Relay) pump(c *relayConn, src *bufio.Reader, dst net.Conn, max int, note func(*relayConn, []byte), from, to string) {
	defer c.close()
	w := bufio.NewWriterSize(dst, bufferSize)
	var buf []byte
	for {
		frame, err := encoding.ReadFrame(src, buf, max)
		if err != nil {
			if w.Buffered() > 0 { // whole frames read before the failure: bounded, dst may not read
				dst.SetWriteDeadline(time.Now().Add(time.Second))
				w.Flush()
			}
			r.logEnd(c, from, err)
			return
		}
		buf = frame[:0]
		note(c, frame)
		if err := writeFrame(w, frame, !frameBuffered(src)); err != nil {
			r.logEnd(c, to, err)
			return
		}
	}
}

// frameBuffered reports whether r holds a whole frame already, which can go out with the one
// before it. Part of a frame does not count: the frames before it must not wait for its rest.
func frameBuffered(r *bufio.Reader) bool {
	if r.Buffered() < 4 {
		return false
	}
	b, _ := r.Peek(4) // buffered: does not block
	n := int32(binary.BigEndian.Uint32(b))
	return n >= 0 && r.Buffered()-4 >= int(n)
}

// writeFrame writes one frame to w, and flushes it when flush is set: when no further whole
// frame has arrived to go with it, so that pipelined frames go out together.
func writeFrame(w *bufio.Writer, frame []byte, flush bool) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(frame)))
	w.Write(n[:])
	w.Write(frame)
	if flush {
		return w.Flush()
	}
	return nil
}

// logEnd logs why a relayed connection ended, at debug level: either side closing it is
// ordinary (a client leaving, a ZooKeeper server closing a session's connection or stopping).
func (r *Relay) logEnd(c *relayConn, side string, err error) {
	if errors.Is(err, net.ErrClosed) {
		return // closed by the other direction, by CloseAll, or by ctx
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	r.log.Debug("relayed connection ended", zap.String("by", side), zap.Stringer("session", c.id),
		zap.String("zookeeper", c.addr), zap.Error(err))
}

// CloseAll closes every relayed connection, both sides, and every client connection still in
// its handshake. Their clients see a disconnection and reconnect, as to ZooKeeper, to whatever
// serves their connect string then; the sessions' records are kept. Connections that Serve
// is given afterwards are relayed.
func (r *Relay) CloseAll() {
	r.mu.Lock()
	conns := slices.Collect(maps.Keys(r.conns))
	clients := slices.Collect(maps.Keys(r.handshaking))
	r.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	for _, nc := range clients {
		nc.Close()
	}
}

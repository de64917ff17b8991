package memberguard

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"
)

// Dialer dials an etcd client's connections (grpc.WithContextDialer(d.Dial)) and keeps them
// by the address dialed, so that every connection to one member can be closed at once (Sever).
// gRPC sets TCP_USER_TIMEOUT to its keepalive timeout on the connections it dials itself, not
// on those a dialer returns: UserTimeout, if set, is that timeout (Linux), so that a
// connection whose data goes unacknowledged is given up as before. The zero Dialer is ready
// to use.
type Dialer struct {
	UserTimeout time.Duration

	mu    sync.Mutex
	conns map[string]map[*trackedConn]struct{} // open connections by address
}

// Dial connects to addr as gRPC names an etcd endpoint: host:port, or a unix socket as
// "unix:path" or "unix:///absolute-path".
func (d *Dialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	network, address := "tcp", addr
	switch {
	case strings.HasPrefix(addr, "unix://"):
		network, address = "unix", strings.TrimPrefix(addr, "unix://")
	case strings.HasPrefix(addr, "unix:"):
		network, address = "unix", strings.TrimPrefix(addr, "unix:")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if tcp, ok := c.(*net.TCPConn); ok && d.UserTimeout > 0 {
		if err := setUserTimeout(tcp, d.UserTimeout); err != nil {
			c.Close()
			return nil, err
		}
	}
	tc := &trackedConn{Conn: c, d: d, addr: addr}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns == nil {
		d.conns = map[string]map[*trackedConn]struct{}{}
	}
	if d.conns[addr] == nil {
		d.conns[addr] = map[*trackedConn]struct{}{}
	}
	d.conns[addr][tc] = struct{}{}
	return tc, nil
}

// Sever closes every open connection to addr and reports how many it closed. What was in
// flight on them fails at once, where it would wait for a silent member.
func (d *Dialer) Sever(addr string) int {
	d.mu.Lock()
	conns := d.conns[addr]
	delete(d.conns, addr)
	d.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return len(conns)
}

// open reports how many connections to addr are open.
func (d *Dialer) open(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns[addr])
}

// trackedConn is a connection Dialer keeps until it closes.
type trackedConn struct {
	net.Conn
	d    *Dialer
	addr string
}

func (c *trackedConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns[c.addr], c)
	if len(c.d.conns[c.addr]) == 0 {
		delete(c.d.conns, c.addr)
	}
	c.d.mu.Unlock()
	return c.Conn.Close()
}

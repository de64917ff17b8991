package memberguard

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// Dialer dials an etcd client's connections (grpc.WithContextDialer(d.Dial)) and keeps them
// by the address dialed, so that every connection to one member can be closed at once (Sever).
// gRPC sets TCP_USER_TIMEOUT to its keepalive timeout on the connections it dials itself, not
// on those a dialer returns: UserTimeout, if set, is that timeout (Linux), so that a
// connection whose data goes unacknowledged is given up as before. The zero Dialer is ready
// to use.
//
// A dialer given to gRPC also replaces gRPC's use of the HTTPS proxy the environment names
// (HTTPS_PROXY, NO_PROXY): Dial connects through it, as gRPC would, so that a zetcd given
// several members reaches them as one given a single member does.
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
	var proxy *url.URL
	if network == "tcp" {
		var err error
		if proxy, err = proxyFor(address); err != nil {
			return nil, err
		}
	}
	dialAddr := address
	if proxy != nil {
		dialAddr = proxyAddr(proxy)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, dialAddr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := c.(*net.TCPConn); ok && d.UserTimeout > 0 {
		if err := setUserTimeout(tcp, d.UserTimeout); err != nil {
			c.Close()
			return nil, err
		}
	}
	if proxy != nil {
		if c, err = connectThrough(ctx, c, proxy, address); err != nil {
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

// proxyFor returns the HTTP proxy the environment names for a TLS or plain connection to the
// TCP address addr (host:port), nil for none: gRPC's choice, which looks the address up as an
// https URL. Read on each dial, as the environment may change (tests).
func proxyFor(addr string) (*url.URL, error) {
	proxy, err := httpproxy.FromEnvironment().ProxyFunc()(&url.URL{Scheme: "https", Host: addr})
	if err != nil {
		return nil, fmt.Errorf("proxy for %s: %w", addr, err)
	}
	if proxy != nil && proxy.Scheme != "http" {
		return nil, fmt.Errorf("proxy for %s: %s: only http proxies (CONNECT) are supported", addr, proxy.Redacted())
	}
	return proxy, nil
}

// proxyAddr is proxy's host:port, port 80 if it names none.
func proxyAddr(proxy *url.URL) string {
	if proxy.Port() != "" {
		return proxy.Host
	}
	return net.JoinHostPort(proxy.Hostname(), "80")
}

// connectThrough asks the HTTP proxy that c is connected to for a tunnel to target (CONNECT),
// with the proxy URL's user as basic credentials, and returns the tunnel; it closes c if the
// proxy refuses. ctx bounds the exchange.
func connectThrough(ctx context.Context, c net.Conn, proxy *url.URL, target string) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: target}, Host: target, Header: http.Header{}}
	if u := proxy.User; u != nil {
		password, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+password)))
	}
	fail := func(err error) (net.Conn, error) {
		c.Close()
		return nil, fmt.Errorf("connect to %s through proxy %s: %w", target, proxy.Redacted(), err)
	}
	if err := req.Write(c); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("the proxy answered %s", resp.Status))
	}
	if !stop() || c.SetDeadline(time.Time{}) != nil {
		return fail(ctx.Err())
	}
	if br.Buffered() > 0 {
		// Bytes of the tunnel that came with the answer.
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

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

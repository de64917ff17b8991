package memberguard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// connectProxy is an HTTP proxy that answers CONNECT for any target with a tunnel to one
// address, and records what it was asked.
type connectProxy struct {
	ln     net.Listener
	to     string // where every tunnel goes
	status int    // the answer to CONNECT

	mu       sync.Mutex
	targets  []string // the CONNECT targets, in order
	authLast string   // the last Proxy-Authorization header
}

func startConnectProxy(t *testing.T, to string, status int) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln, to: to, status: status}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.authLast = req.Header.Get("Proxy-Authorization")
	p.mu.Unlock()
	if p.status != http.StatusOK {
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", p.status, http.StatusText(p.status))
		return
	}
	up, err := net.Dial("tcp", p.to)
	if err != nil {
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go io.Copy(up, br)
	io.Copy(c, up)
}

func (p *connectProxy) asked() ([]string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...), p.authLast
}

// setProxyEnv names proxy as the environment's HTTPS proxy, with no exceptions.
func setProxyEnv(t *testing.T, proxy string) {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(k, "")
	}
	t.Setenv("HTTPS_PROXY", proxy)
}

// TestDialerThroughProxy: with HTTPS_PROXY set, an etcd client dialing through the Dialer
// reaches a member named by a host only the proxy knows, through the proxy's tunnel, with the
// proxy URL's credentials, as gRPC's own dialer would; a loopback member is reached directly,
// as gRPC does; a proxy that refuses the tunnel fails the dial with its answer.
func TestDialerThroughProxy(t *testing.T) {
	_, u := startEtcd(t, false)
	proxy := startConnectProxy(t, u.Host, http.StatusOK)
	setProxyEnv(t, "http://zetcd:secret@"+proxy.ln.Addr().String())

	d := &Dialer{}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://etcd-member.invalid:2379"},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(d.Dial)},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "through", "the proxy"); err != nil {
		t.Fatalf("put through the proxy: %v", err)
	}
	targets, auth := proxy.asked()
	if len(targets) == 0 || targets[0] != "etcd-member.invalid:2379" {
		t.Errorf("the proxy was asked for %q, want etcd-member.invalid:2379", targets)
	}
	if want := "Basic emV0Y2Q6c2VjcmV0"; auth != want { // zetcd:secret
		t.Errorf("Proxy-Authorization %q, want %q", auth, want)
	}
	if n := d.open("etcd-member.invalid:2379"); n == 0 {
		t.Error("the tunnel is not tracked under the member's address: Sever would miss it")
	}

	// Loopback: not proxied.
	c, err := d.Dial(ctx, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if again, _ := proxy.asked(); len(again) != len(targets) {
		t.Errorf("a loopback member was dialed through the proxy (%q)", again[len(targets):])
	}

	refusing := startConnectProxy(t, u.Host, http.StatusProxyAuthRequired)
	setProxyEnv(t, "http://"+refusing.ln.Addr().String())
	if _, err := d.Dial(ctx, "etcd-member.invalid:2379"); err == nil || !strings.Contains(err.Error(), "407") {
		t.Errorf("dial through a proxy that refuses: %v, want its 407", err)
	}
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/zksession"
)

func TestParseAdminFlags(t *testing.T) {
	tls := []string{"--tls-zkaddr", "127.0.0.1:2281", "--tls-cert", "c", "--tls-key", "k"}
	for _, args := range [][]string{
		{"--admin-addr", "127.0.0.1:8080"},
		append([]string{"--admin-addr", "127.0.0.1:8080", "--admin-tls"}, tls...),
	} {
		if _, err := parseFlags(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{
		{"--admin-addr", "127.0.0.1:8080", "--admin-tls"},
		append([]string{"--admin-tls"}, tls...),
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestAdminTLS: with --admin-tls the AdminServer answers over TLS with the client port's
// certificate, and not in plain HTTP; a session on the TLS client port is listed among the
// secure connections.
func TestAdminTLS(t *testing.T) {
	pki := itest.NewPKI(t)
	cert, key, _ := pki.Issue(t, "server", pkix.Name{CommonName: "127.0.0.1"})
	o, err := parseFlags([]string{"--admin-addr", "127.0.0.1:0", "--admin-tls", "--tls-zkaddr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key})
	if err != nil {
		t.Fatal(err)
	}
	z := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{})
	ep, err := startAdmin(o, zaptest.NewLogger(t), z.Server, z.Backend, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.stop()
	pool, err := loadCAs(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
	get := func(cmd string) map[string]any {
		t.Helper()
		resp, err := client.Get("https://" + ep.addr.String() + "/commands/" + cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out["command"] != cmd {
			t.Errorf("https %s: %d %v, %v", cmd, resp.StatusCode, out, err)
		}
		return out
	}
	get("ruok")

	ports, err := o.security.listen("")
	if err != nil {
		t.Fatal(err)
	}
	go z.Server.Serve(ports[0].ln)
	conn, events, err := zk.Connect([]string{ports[0].ln.Addr().String()}, 10*time.Second, zk.WithLogInfo(false),
		zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := zksession.Await(context.Background(), events, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	cons := get("connections")
	if plain, secure := cons["connections"].([]any), cons["secure_connections"].([]any); len(plain) != 0 || len(secure) != 1 {
		t.Errorf("connections: %v plain, %v secure; want the TLS session's only, among the secure", plain, secure)
	}

	// Go's TLS server answers an HTTP request with 400 and nothing of the handler's.
	resp, err := http.Get("http://" + ep.addr.String() + "/commands/ruok")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP on the TLS admin port: %d, want 400", resp.StatusCode)
	}
}

package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
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
// certificate, and not in plain HTTP.
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
	resp, err := client.Get("https://" + ep.addr.String() + "/commands/ruok")
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || out["command"] != "ruok" {
		t.Errorf("https ruok: %d %v, %v", resp.StatusCode, out, err)
	}
	// Go's TLS server answers an HTTP request with 400 and nothing of the handler's.
	resp, err = http.Get("http://" + ep.addr.String() + "/commands/ruok")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP on the TLS admin port: %d, want 400", resp.StatusCode)
	}
}

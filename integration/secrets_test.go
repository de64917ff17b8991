package integration

import (
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
)

// TestSecretsNotShown: secrets given to the zetcd binary by flag (the super user's digest, etcd's
// password), and the super user's password a client authenticates with, appear in none of what
// zetcd shows: its logs at debug with every request logged, the four-letter words, /metrics and
// /debug/pprof/cmdline.
func TestSecretsNotShown(t *testing.T) {
	etcd := startEtcd(t)
	const superPassword, etcdPassword = "zk-super-password-1", "etcd-password-2"
	sum := sha1.Sum([]byte("super:" + superPassword))
	hash := base64.StdEncoding.EncodeToString(sum[:])
	addr, metrics := itest.FreePort(t), itest.FreePort(t)
	p := itest.StartProcessArgs(t, addr, "--endpoints", etcd.Etcd.Endpoint, "--etcd-user", "zetcd", "--etcd-password", etcdPassword,
		"--super-digest", "super:"+hash, "--metrics-addr", metrics, "--pprof", "--4lw-whitelist", "*",
		"--log-level", "debug", "--log-requests")

	shown := map[string]string{}
	c := connect(t, addr)
	if err := c.AddAuth("digest", []byte("super:"+superPassword)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/private", []byte("x"), 0, zk.DigestACL(zk.PermAll, "someone", "pw")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get("/private"); err != nil { // the super user passes the ACL
		t.Fatal(err)
	}
	for _, w := range strings.Fields("ruok srvr stat mntr conf envi isro cons wchs dirs wchc wchp dump gtmk") {
		out, err := itest.FourLetter(addr, w)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		shown[w] = out
	}
	for _, path := range []string{"/metrics", "/debug/pprof/cmdline"} {
		resp, err := http.Get("http://" + metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		shown[path] = string(body)
	}
	if !strings.Contains(shown["/debug/pprof/cmdline"], "--super-digest\x00REDACTED") {
		t.Errorf("/debug/pprof/cmdline: %q", shown["/debug/pprof/cmdline"])
	}
	c.Close()
	p.Stop(t)
	shown["logs"] = p.Logs.String()
	if !strings.Contains(shown["logs"], `"op":"auth"`) {
		t.Errorf("the request log does not show the auth request: is it on?\n%s", shown["logs"])
	}

	for where, text := range shown {
		for _, secret := range []string{hash, etcdPassword, superPassword} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows the secret %q", where, secret)
			}
		}
	}
}

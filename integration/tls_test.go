package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/zksession"
)

// secureEtcd is an embedded etcd serving TLS with client certificates required and
// authentication on. The zetcd user's role may read and write the keys under /zk/ and nothing
// else, so a zetcd that works with it never touches a key outside its prefix.
type secureEtcd struct {
	Endpoint string
	root     *clientv3.Client
}

func startSecureEtcd(t testing.TB, pki *itest.PKI) *secureEtcd {
	t.Helper()
	cert, key, _ := pki.Issue(t, "etcd-server", pkix.Name{CommonName: "etcd"})
	e, err := embedetcd.Start(embedetcd.Config{
		Dir:       t.TempDir(),
		ClientURL: "https://127.0.0.1:0",
		TLS:       &embedetcd.TLS{CertFile: cert, KeyFile: key, TrustedCAFile: pki.CAFile, ClientCertAuth: true},
		Users:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	_, _, rootPair := pki.Issue(t, "etcd-root", pkix.Name{CommonName: "root"})
	root, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.Endpoint},
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{rootPair}, RootCAs: pki.Pool},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a bound for a hang
	defer cancel()
	steps := []func() error{
		func() error { _, err := root.Put(ctx, "/outside", "untouched"); return err },
		func() error { _, err := root.Put(ctx, "/zk", "next to the prefix"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "zetcd"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "zetcd", "/zk/", clientv3.GetPrefixRangeEnd("/zk/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "zetcd", "zetcdpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "zetcd", "zetcd"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("secure etcd setup step %d: %v", i, err)
		}
	}
	// The zetcd user may not touch anything else.
	_, _, pair := pki.Issue(t, "etcd-zetcd-check", pkix.Name{CommonName: "zetcd"})
	zc, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second, Username: "zetcd", Password: "zetcdpw",
		TLS: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pki.Pool}, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, err := zc.Get(ctx, "/outside"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("the zetcd user read /outside: %v", err)
	}
	if _, err := zc.Put(ctx, "/zk", "x"); err == nil {
		t.Fatal("the zetcd user wrote /zk (outside the prefix /zk/)")
	}
	if _, err := zc.Get(ctx, "/zk/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("the zetcd user cannot read its prefix: %v", err)
	}
	return &secureEtcd{Endpoint: e.Endpoint, root: root}
}

// value reads a key as root (the client certificate's CN).
func (e *secureEtcd) value(t testing.TB, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := e.root.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return ""
	}
	return string(r.Kvs[0].Value)
}

// dialTLS connects to a TLS client port with the client certificate pair (none if empty).
func dialTLS(t testing.TB, addr string, pki *itest.PKI, pair *tls.Certificate) *itest.RawClient {
	t.Helper()
	cfg := &tls.Config{RootCAs: pki.Pool}
	if pair != nil {
		cfg.Certificates = []tls.Certificate{*pair}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c := &itest.RawClient{T: t, Conn: conn, R: bufio.NewReader(conn)}
	if resp, err := c.Handshake(encoding.ConnectRequest{TimeOut: 10000, HasReadOnly: true}); err != nil || resp.SessionID == 0 {
		t.Fatalf("handshake over TLS: %+v %v", resp, err)
	}
	return c
}

// dialTLSResume resumes a session through a TLS client port.
func dialTLSResume(t testing.TB, addr string, pki *itest.PKI, pair *tls.Certificate, sess encoding.ConnectResponse) *itest.RawClient {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{*pair}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c := &itest.RawClient{T: t, Conn: conn, R: bufio.NewReader(conn)}
	resp, err := c.Handshake(encoding.ConnectRequest{TimeOut: sess.TimeOut, SessionID: sess.SessionID, Passwd: sess.Passwd, HasReadOnly: true})
	if err != nil || resp.SessionID != sess.SessionID {
		t.Fatalf("resume over TLS: %+v %v", resp, err)
	}
	return c
}

// TestTLSAndSecureEtcd runs the zetcd binary with a TLS client port that requires client
// certificates, against an etcd that serves TLS only, requires client certificates and has
// authentication on, logged in as a user whose role covers the prefix /zk/ and nothing else.
// A go-zookeeper client and a raw client connect through the TLS port and use every kind of
// operation; the keys outside the prefix are untouched, and zetcd logged no error.
func TestTLSAndSecureEtcd(t *testing.T) {
	pki := itest.NewPKI(t)
	etcd := startSecureEtcd(t, pki)
	etcdCert, etcdKey, _ := pki.Issue(t, "zetcd-etcd-client", pkix.Name{CommonName: "zetcd"})
	srvCert, srvKey, _ := pki.Issue(t, "zetcd-server", pkix.Name{CommonName: "zetcd"})
	_, _, clientPair := pki.Issue(t, "zk-client", pkix.Name{CommonName: "client", Organization: []string{"zetcd-test"}})
	plain, secure, metrics := itest.FreePort(t), itest.FreePort(t), itest.FreePort(t)
	p := itest.StartProcessArgs(t, plain,
		"--metrics-addr", metrics, "--4lw-whitelist", "*",
		"--endpoints", etcd.Endpoint,
		"--etcd-cert", etcdCert, "--etcd-key", etcdKey, "--etcd-cacert", pki.CAFile,
		"--etcd-user", "zetcd", "--etcd-password", "zetcdpw",
		"--tls-zkaddr", secure, "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-ca", pki.CAFile,
		"--super-digest", superDigest,
		"--reap-interval", "200ms",
		"--log-level", "error")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("zetcd's log:\n%s", p.Logs.String())
		}
	})

	// go-zookeeper through the TLS port.
	conn, events, err := zk.Connect([]string{secure}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(itest.QuietLogger{}),
		zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address,
				&tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{clientPair}})
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := zksession.Await(context.Background(), events, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := conn.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/app", []byte("v1"), 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/app/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := conn.GetW("/app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set("/app", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged {
			t.Errorf("watch event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event over TLS")
	}
	if _, err := conn.Multi(&zk.CreateRequest{Path: "/app/m", Data: nil, Acl: zk.WorldACL(zk.PermAll)},
		&zk.SetDataRequest{Path: "/app/m", Data: []byte("x"), Version: 0}); err != nil {
		t.Fatal(err)
	}
	if kids, _, err := conn.Children("/app"); err != nil || len(kids) != 2 {
		t.Errorf("children %v %v", kids, err)
	}
	if _, err := conn.Sync("/app"); err != nil {
		t.Error(err)
	}
	if acl, _, err := conn.GetACL("/app"); err != nil || len(acl) != 2 {
		// auth expands to the digest id and to the x509 identity of the certificate.
		t.Errorf("getACL %v %v", acl, err)
	}
	if err := conn.Delete("/app/m", -1); err != nil {
		t.Error(err)
	}

	// A raw client through the TLS port holds its certificate's identity.
	c := dialTLS(t, secure, pki, &clientPair)
	dn := "CN=client,O=zetcd-test"
	if got := c.WhoAmI(); !slices.Contains(got, "x509:"+dn) {
		t.Errorf("whoAmI over TLS: %v", got)
	}
	c.MustCreateACL("/x509only", itest.ACLOf(encoding.PermAll, "x509", dn))
	if code := c.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/x509only"}, &encoding.GetDataResponse{}); code != 0 {
		t.Errorf("getData of an x509 node with its certificate: %v", code)
	}
	pc := itest.ConnectRaw(t, plain)
	if code := pc.MustCall(encoding.OpGetData, &encoding.GetDataRequest{Path: "/x509only"}, &encoding.GetDataResponse{}); code != encoding.ErrNoAuth {
		t.Errorf("getData of an x509 node over the plain port: %v", code)
	}
	if code, _ := itest.ConnectRaw(t, plain).Auth("x509", ""); code != encoding.ErrAuthFailed {
		t.Errorf("auth x509 without a certificate: %v", code)
	}
	// The rest of the opcodes, through TLS.
	c.MustCall(encoding.OpCreateContainer, &encoding.CreateRequest{Path: "/box", ACL: itest.RawOpenACL, Flags: encoding.ModeContainer}, &encoding.Create2Response{})
	c.MustCreate("/box/item", nil, 0)
	c.MustCall(encoding.OpCreateTTL, &encoding.CreateTTLRequest{Path: "/ttl", ACL: itest.RawOpenACL, Flags: encoding.ModePersistentWithTTL, TTL: 100}, &encoding.Create2Response{})
	c.MustCreate("/eph", nil, encoding.ModeEphemeral)
	var eph encoding.GetEphemeralsResponse
	if code := c.MustCall(encoding.OpGetEphemerals, &encoding.GetEphemeralsRequest{PrefixPath: "/"}, &eph); code != 0 || !slices.Equal(eph.Ephemerals, []string{"/eph"}) {
		t.Errorf("getEphemerals: %v %v", code, eph.Ephemerals)
	}
	var n encoding.GetAllChildrenNumberResponse
	if code := c.MustCall(encoding.OpGetAllChildrenNumber, &encoding.GetAllChildrenNumberRequest{Path: "/box"}, &n); code != 0 || n.TotalNumber != 1 {
		t.Errorf("getAllChildrenNumber: %v %v", code, n)
	}
	var mr encoding.MultiResponse
	if code := c.MustCall(encoding.OpMultiRead, &encoding.MultiRequest{Ops: []encoding.MultiOp{
		{Op: encoding.OpGetData, Record: &encoding.GetDataRequest{Path: "/box"}},
		{Op: encoding.OpGetChildren, Record: &encoding.GetChildrenRequest{Path: "/box"}},
	}}, &mr); code != 0 || len(mr.Results) != 2 || mr.Results[1].Err != 0 {
		t.Errorf("multiRead: %v %+v", code, mr.Results)
	}
	c.MustCall(encoding.OpAddWatch, &encoding.AddWatchRequest{Path: "/box", Mode: encoding.AddWatchPersistentRecursive}, &encoding.ErrorResponse{})
	if code := c.MustCall(encoding.OpCheckWatches, &encoding.CheckWatchesRequest{Path: "/box", Type: encoding.WatcherPersistentRecursive}, nil); code != 0 {
		t.Errorf("checkWatches: %v", code)
	}
	c.Delete("/box/item")
	if evs := c.WaitEvents(1); evs[0].String() != "NodeDeleted /box/item" {
		t.Errorf("recursive watch over TLS: %v", evs)
	}
	if code := c.MustCall(encoding.OpReconfig, &encoding.ReconfigRequest{CurConfigID: -1}, &encoding.GetDataResponse{}); code != encoding.ErrReconfigDisabled {
		t.Errorf("reconfig: %v", code)
	}
	// The reaper (elected through etcd, under the prefix) removes the emptied container and
	// the expired TTL node.
	waitGoneRaw(t, c, "/box")
	waitGoneRaw(t, c, "/ttl")
	// closeSession deletes the ephemerals and revokes the lease.
	if code := c.MustCall(encoding.OpCloseSession, nil, nil); code != 0 {
		t.Errorf("closeSession: %v", code)
	}
	if pc.Exists("/eph") {
		t.Error("ephemeral survived closeSession")
	}
	for cmd, want := range map[string]string{"srvr": "Mode: standalone", "mntr": "zk_znode_count", "cons": "queued", "wchs": "Total watches"} {
		if out, err := itest.FourLetter(plain, cmd); err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %q %v", cmd, out, err)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}

	// setACL, create2, setWatches, removeWatches; a session resumed through TLS; a session
	// that expires (its ephemerals deleted by zetcd, its lease revoked).
	s := dialTLS(t, secure, pki, &clientPair)
	s.MustCall(encoding.OpCreate2, &encoding.CreateRequest{Path: "/two", ACL: itest.RawOpenACL}, &encoding.Create2Response{})
	if code := s.SetACL("/two", itest.WorldACL(encoding.PermRead|encoding.PermAdmin)); code != 0 {
		t.Errorf("setACL: %v", code)
	}
	rel := s.Create("/w", nil, 0)
	s.MustCall(encoding.OpSetWatches, &encoding.SetWatches{RelativeZxid: rel, DataWatches: []string{"/w"}, ExistWatches: []string{}, ChildWatches: []string{"/w"}}, nil)
	if code := s.MustCall(encoding.OpRemoveWatches, &encoding.RemoveWatchesRequest{Path: "/w", Type: encoding.WatcherChildren}, nil); code != 0 {
		t.Errorf("removeWatches: %v", code)
	}
	s.MustCreate("/eph2", nil, encoding.ModeEphemeral)
	s.Close()
	rc := dialTLSResume(t, secure, pki, &clientPair, s.Session)
	if !rc.Exists("/eph2") {
		t.Error("ephemeral gone after resuming over TLS")
	}
	rc.Close()
	pc2 := itest.ConnectRaw(t, plain)
	testenv.Eventually(t, 30*time.Second, "the session's ephemeral gone with its expiry", func() error {
		if pc2.Exists("/eph2") {
			return errors.New("/eph2 still exists")
		}
		return nil
	})

	// A client without a certificate is refused by the TLS port.
	raw, err := net.Dial("tcp", secure)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, &tls.Config{RootCAs: pki.Pool})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = tc.Write(encoding.AppendFrame(nil, &encoding.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}))
	if err == nil {
		_, err = tc.Read(make([]byte, 64))
	}
	if err == nil {
		t.Error("the TLS port served a client without a certificate")
	}
	tc.Close()

	// Nothing outside the prefix was touched (etcd would have refused it anyway).
	if v := etcd.value(t, "/outside"); v != "untouched" {
		t.Errorf("/outside = %q", v)
	}
	if v := etcd.value(t, "/zk"); v != "next to the prefix" {
		t.Errorf("/zk = %q", v)
	}
	p.Stop(t)
	if logs := p.Logs.String(); strings.Contains(logs, "permission denied") || strings.Contains(logs, `"level":"error"`) {
		t.Errorf("zetcd logged errors:\n%s", logs)
	}
}

// waitGoneRaw waits until path does not exist, failing the test after 10s.
func waitGoneRaw(t testing.TB, c *itest.RawClient, path string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, path+" gone", func() error {
		if c.Exists(path) {
			return errors.New("still exists")
		}
		return nil
	})
}

package integration

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLSJavaClient: ZooKeeper's command line client (ZooKeeperMain 3.9) with the Java client's
// Netty transport over TLS, as Kafka and other Java users configure it (zookeeper.client.secure,
// PEM key and trust stores, hostname verification), with a client certificate, against zetcd's
// TLS port: the handshake completes, the session holds the certificate's x509 identity beside
// its ip one (whoami, in ZooKeeper's order), and an `auth` ACL names it.
func TestTLSJavaClient(t *testing.T) {
	pki := newTestPKI(t)
	srvCert, srvKey, _ := pki.issue(t, "zetcd-server", pkix.Name{CommonName: "zetcd"})
	_, _, pair := pki.issue(t, "java-client", pkix.Name{CommonName: "java", Organization: []string{"zetcd-test"}})
	// The Java client reads a PEM key store of a PKCS#8 key and the certificate.
	key, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyStore := filepath.Join(t.TempDir(), "java-client.pem")
	text := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	text = append(text, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]})...)
	if err := os.WriteFile(keyStore, text, 0o600); err != nil {
		t.Fatal(err)
	}
	secure := freePort(t)
	startProcessArgs(t, freePort(t), "--endpoints", startEtcd(t).Etcd.Endpoint,
		"--tls-zkaddr", secure, "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-ca", pki.CAFile, "--log-level", "error")

	cmd := javaProgram(t, t.TempDir(), "org.apache.zookeeper.ZooKeeperMain", nil, []string{
		"-Dzookeeper.sasl.client=false",
		"-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
		"-Dzookeeper.client.secure=true",
		"-Dzookeeper.ssl.keyStore.location=" + keyStore, "-Dzookeeper.ssl.keyStore.type=PEM",
		"-Dzookeeper.ssl.trustStore.location=" + pki.CAFile, "-Dzookeeper.ssl.trustStore.type=PEM",
		"-Dzookeeper.ssl.hostnameVerification=true",
	}, "-server", secure)
	cmd.Stdin = strings.NewReader("create /tls v\nget /tls\nwhoami\ncreate /tls/own x auth::cdrwa\ngetAcl /tls/own\nquit\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("zkCli over TLS: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()+stderr.String()), "\n") {
		if !strings.HasPrefix(l, "Connecting to ") {
			lines = append(lines, l)
		}
	}
	wantLines(t, "zkCli over TLS", lines, []string{
		"Welcome to ZooKeeper!",
		"JLine support is disabled",
		"",
		"WATCHER::",
		"",
		"WatchedEvent state:SyncConnected type:None path:null zxid: -1",
		"v",
		"Auth scheme: User",
		"x509: CN=java,O=zetcd-test",
		"ip: 127.0.0.1",
		"'x509,'CN=java%2CO=zetcd-test", // the client prints an Id as jute's CSV, commas escaped
		": cdrwa",
		"",
		"WATCHER::",
		"",
		"WatchedEvent state:Closed type:None path:null zxid: -1",
		"Created /tls",
		"Created /tls/own",
	})
}

package clients

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
)

// TestTLSJavaClient: ZooKeeper's command line client (ZooKeeperMain 3.9) with the Java client's
// Netty transport over TLS, as Kafka and other Java users configure it (zookeeper.client.secure,
// PEM key and trust stores, hostname verification), with a client certificate, against zetcd's
// TLS port and against ZooKeeper's (secureClientPort, X509AuthenticationProvider): the handshake
// completes, the session holds the certificate's x509 identity beside its ip one (whoami), and an
// `auth` ACL names it, alike on both.
func TestTLSJavaClient(t *testing.T) {
	pki := itest.NewPKI(t)
	srvCert, srvKey, srvPair := pki.Issue(t, "server", pkix.Name{CommonName: "server"})
	_, _, clientPair := pki.Issue(t, "java-client", pkix.Name{CommonName: "java", Organization: []string{"zetcd-test"}})
	clientStore := javaKeyStore(t, clientPair)
	want := slices.Concat(zkCliOpened, []string{
		"v",
		"Auth scheme: User",
		"x509: CN=java,O=zetcd-test",
		"ip: 127.0.0.1",
		"'x509,'CN=java%2CO=zetcd-test", // the client prints an Id as jute's CSV, commas escaped
		": cdrwa",
	}, zkCliClosed, []string{
		"--- stderr",
		"Created /tls",
		"Created /tls/own",
	})
	t.Run("zetcd", func(t *testing.T) {
		secure := itest.FreePort(t)
		itest.StartProcessArgs(t, itest.FreePort(t), "--endpoints", startEtcd(t).Etcd.Endpoint,
			"--tls-zkaddr", secure, "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-ca", pki.CAFile, "--log-level", "error")
		wantLines(t, "zkCli over TLS on zetcd", zkCliOverTLS(t, secure, clientStore, pki.CAFile), want)
	})
	t.Run("zookeeper", func(t *testing.T) {
		secure := itest.FreePort(t)
		zkserver.Start(t, zkserver.Options{ConfigLines: []string{
			"secureClientPort=" + secure[strings.LastIndex(secure, ":")+1:],
			"secureClientPortAddress=127.0.0.1",
			"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
			"authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
			"ssl.keyStore.location=" + javaKeyStore(t, srvPair), "ssl.keyStore.type=PEM",
			"ssl.trustStore.location=" + pki.CAFile, "ssl.trustStore.type=PEM",
		}})
		wantLines(t, "zkCli over TLS on ZooKeeper", zkCliOverTLS(t, secure, clientStore, pki.CAFile), want)
	})
}

// javaKeyStore writes pair as the PEM key store Java reads: a PKCS#8 key, then the certificate.
func javaKeyStore(t *testing.T, pair tls.Certificate) string {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keystore.pem")
	text := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	text = append(text, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]})...)
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// zkCliOverTLS runs a short zkCli script through addr's TLS port with the client certificate of
// keyStore (runZkCli).
func zkCliOverTLS(t *testing.T, addr, keyStore, caFile string) []string {
	t.Helper()
	return runZkCli(t, addr, "create /tls v\nget /tls\nwhoami\ncreate /tls/own x auth::cdrwa\ngetAcl /tls/own\nquit\n", []string{
		"-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
		"-Dzookeeper.client.secure=true",
		"-Dzookeeper.ssl.keyStore.location=" + keyStore, "-Dzookeeper.ssl.keyStore.type=PEM",
		"-Dzookeeper.ssl.trustStore.location=" + caFile, "-Dzookeeper.ssl.trustStore.type=PEM",
		"-Dzookeeper.ssl.hostnameVerification=true",
	})
}

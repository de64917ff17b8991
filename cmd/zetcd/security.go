package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
)

// securityOptions are the flags of the client port's TLS, the super user, and the connection
// to etcd (TLS and etcd authentication).
type securityOptions struct {
	superDigest string // --super-digest, --super-digest-file or $ZETCD_SUPER_DIGEST (secrets.go)

	tlsZkAddr string // --tls-zkaddr: the TLS client port (ZooKeeper's secureClientPort)
	tlsCert   string // --tls-cert
	tlsKey    string // --tls-key
	tlsCA     string // --tls-ca: require and verify client certificates signed by it

	etcdCert     string // --etcd-cert
	etcdKey      string // --etcd-key
	etcdCACert   string // --etcd-cacert
	etcdUser     string // --etcd-user
	etcdPassword string // --etcd-password, --etcd-password-file or $ZETCD_ETCD_PASSWORD

	superDigestFile, etcdPasswordFile string // --super-digest-file, --etcd-password-file
}

func (s *securityOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tlsZkAddr, "tls-zkaddr", "", "address to serve ZooKeeper clients on over TLS (secureClientPort); needs --tls-cert, --tls-key")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate (chain) of the TLS client port")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of the TLS client port")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA certificates the TLS client port requires client certificates from; see docs/operating.md, \"Security\"")
	fs.StringVar(&s.etcdCert, "etcd-cert", "", "PEM client certificate zetcd presents to etcd (with --endpoints)")
	fs.StringVar(&s.etcdKey, "etcd-key", "", "PEM private key of --etcd-cert")
	fs.StringVar(&s.etcdCACert, "etcd-cacert", "", "PEM CA certificates that verify etcd's server certificate (default: the system's)")
	fs.StringVar(&s.etcdUser, "etcd-user", "", "etcd user name (etcd authentication; with --endpoints)")
	s.registerSecrets(fs)
}

// check validates the combination of flags.
func (s *securityOptions) check(zkAddr, endpoints string) error {
	if zkAddr == "" && s.tlsZkAddr == "" {
		return errors.New("--zkaddr and --tls-zkaddr are both empty: no client port")
	}
	if s.tlsZkAddr != "" && (s.tlsCert == "" || s.tlsKey == "") {
		return errors.New("--tls-zkaddr needs --tls-cert and --tls-key")
	}
	if s.tlsZkAddr == "" && (s.tlsCert != "" || s.tlsKey != "" || s.tlsCA != "") {
		return errors.New("--tls-cert, --tls-key and --tls-ca need --tls-zkaddr")
	}
	if (s.etcdCert == "") != (s.etcdKey == "") {
		return errors.New("--etcd-cert and --etcd-key go together")
	}
	if s.etcdPassword != "" && s.etcdUser == "" {
		return errors.New("--etcd-password (or its file or $ZETCD_ETCD_PASSWORD) needs --etcd-user")
	}
	if endpoints == "" && (s.etcdCert != "" || s.etcdCACert != "" || s.etcdUser != "") {
		return errors.New("--etcd-cert, --etcd-cacert and --etcd-user need --endpoints (the embedded etcd has neither TLS nor users)")
	}
	if s.superDigest != "" && !strings.Contains(s.superDigest, ":") {
		// (Not quoted: it is a secret.)
		return errors.New("--super-digest is not user:BASE64(SHA1(user:password))")
	}
	return nil
}

// x509 reports whether clients hold x509 identities (verified client certificates).
func (s *securityOptions) x509() bool { return s.tlsCA != "" }

// clientTLS returns the TLS configuration of the client port, nil without --tls-zkaddr.
func (s *securityOptions) clientTLS() (*tls.Config, error) {
	if s.tlsZkAddr == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		pool, err := loadCAs(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// etcdTLS returns the TLS configuration toward etcd, nil when no TLS flag is given (an https
// endpoint then uses the system's CAs).
func (s *securityOptions) etcdTLS() (*tls.Config, error) {
	if s.etcdCert == "" && s.etcdCACert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.etcdCert != "" {
		cert, err := tls.LoadX509KeyPair(s.etcdCert, s.etcdKey)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if s.etcdCACert != "" {
		pool, err := loadCAs(s.etcdCACert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", file)
	}
	return pool, nil
}

// clientPort is a listener of the client protocol.
type clientPort struct {
	ln  net.Listener
	tls bool
}

// listen opens the client ports: the plain one (unless zkAddr is empty) and the TLS one.
func (s *securityOptions) listen(zkAddr string) ([]clientPort, error) {
	var ports []clientPort
	closeAll := func() {
		for _, p := range ports {
			p.ln.Close()
		}
	}
	if zkAddr != "" {
		ln, err := net.Listen("tcp", zkAddr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", zkAddr, err)
		}
		ports = append(ports, clientPort{ln: ln})
	}
	cfg, err := s.clientTLS()
	if err != nil {
		closeAll()
		return nil, err
	}
	if cfg != nil {
		ln, err := net.Listen("tcp", s.tlsZkAddr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen on %s: %w", s.tlsZkAddr, err)
		}
		ports = append(ports, clientPort{ln: tls.NewListener(ln, cfg), tls: true})
	}
	return ports, nil
}

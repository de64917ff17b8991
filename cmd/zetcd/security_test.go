package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseSecurityFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.security != (securityOptions{}) {
		t.Errorf("defaults: %+v, %v", o.security, err)
	}
	ok := [][]string{
		{"--super-digest", "super:lK75jTNcA+U9vtVEw5vB51mj/w4="},
		{"--tls-zkaddr", "127.0.0.1:2281", "--tls-cert", "c", "--tls-key", "k"},
		{"--zkaddr", "", "--tls-zkaddr", "127.0.0.1:2281", "--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca"},
		{"--endpoints", "https://e:2379", "--etcd-cert", "c", "--etcd-key", "k", "--etcd-cacert", "ca", "--etcd-user", "u", "--etcd-password", "p"},
	}
	for _, args := range ok {
		if _, err := parseFlags(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	bad := [][]string{
		{"--super-digest", "nocolon"},
		{"--zkaddr", ""},
		{"--tls-zkaddr", "127.0.0.1:2281"},
		{"--tls-zkaddr", "127.0.0.1:2281", "--tls-cert", "c"},
		{"--tls-cert", "c", "--tls-key", "k"},
		{"--tls-ca", "ca"},
		{"--endpoints", "https://e:2379", "--etcd-cert", "c"},
		{"--endpoints", "https://e:2379", "--etcd-password", "p"},
		{"--etcd-user", "u"}, // the embedded etcd has no users
		{"--etcd-cacert", "ca"},
	}
	for _, args := range bad {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestListenTLSOnly: --zkaddr "" and --tls-zkaddr serve one TLS port, which with --tls-ca
// requires client certificates.
func TestListenTLSOnly(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)

	o, err := parseFlags([]string{"--zkaddr", "", "--tls-zkaddr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", keyFile, "--tls-ca", cert})
	if err != nil {
		t.Fatal(err)
	}
	ports, err := o.security.listen(o.zkAddr)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || !ports[0].tls || !o.security.x509() {
		t.Fatalf("ports %+v", ports)
	}
	ln := ports[0].ln
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Write([]byte("ok"))
			}()
		}
	}()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	pair, err := tls.LoadX509KeyPair(cert, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	read := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 2))
		return err
	}
	if err := read(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	if err := read(&tls.Config{RootCAs: pool}); err == nil {
		t.Error("served a client without a certificate")
	}
}

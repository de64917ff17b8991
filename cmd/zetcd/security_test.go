package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/itest"
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
	pki := itest.NewPKI(t)
	cert, keyFile, _ := pki.Issue(t, "server", pkix.Name{CommonName: "zetcd"})
	_, _, pair := pki.Issue(t, "client", pkix.Name{CommonName: "client"})
	o, err := parseFlags([]string{"--zkaddr", "", "--tls-zkaddr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", keyFile, "--tls-ca", pki.CAFile})
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
	pool := pki.Pool
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

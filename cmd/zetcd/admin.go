package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/zetcd"
)

// ZooKeeper's AdminServer on --admin-addr (zetcd/admin.go): /commands and /commands/<name>, over
// TLS with the client port's certificates when --admin-tls is set (ZooKeeper's
// admin.forceHttps). See docs/operating.md, "AdminServer".

// startAdmin listens on --admin-addr and serves srv's AdminServer there; clientPort is the plain
// client port (-1 for none), which its configuration command reports.
func startAdmin(o options, log *zap.Logger, srv *zetcd.Server, backend *etcdstore.Store, clientPort int) (*httpEndpoint, error) {
	ln, err := net.Listen("tcp", o.adminAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for the AdminServer on %s: %w", o.adminAddr, err)
	}
	if o.adminTLS {
		cfg, err := o.security.clientTLS()
		if err != nil {
			ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, cfg)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	h := srv.AdminHandler(zetcd.AdminConfig{
		ClientPort: clientPort,
		Authorizer: backend,
		Properties: map[string]string{
			"zookeeper.admin.enableServer":     "true",
			"zookeeper.admin.serverAddress":    host,
			"zookeeper.admin.serverPort":       port,
			"zookeeper.admin.forceHttps":       strconv.FormatBool(o.adminTLS),
			"zookeeper.4lw.commands.whitelist": o.fourLetterList,
		},
	})
	ep := serveHTTP(ln, h, log.Named("admin"))
	log.Info("serving the AdminServer", zap.String("admin-addr", ep.addr.String()), zap.Bool("tls", o.adminTLS))
	return ep, nil
}

// plainPort is the TCP port of the plain client port among ports, -1 if there is none.
func plainPort(ports []clientPort) int {
	for _, p := range ports {
		if a, ok := p.ln.Addr().(*net.TCPAddr); ok && !p.tls {
			return a.Port
		}
	}
	return -1
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/zetcd/zetcd/internal/sasl"
	"github.com/zetcd/zetcd/zetcd"
)

// saslOptions are the flags of SASL authentication and enforced authentication, named after
// ZooKeeper's system properties. Passwords only ever come from the JAAS file.
type saslOptions struct {
	jaasConfig      string // --sasl-jaas-config (java.security.auth.login.config)
	jaasSection     string // --sasl-jaas-section (zookeeper.sasl.serverconfig)
	superUser       string // --sasl-super-user (zookeeper.superUser)
	required        bool   // --sasl-required (zookeeper.sessionRequireClientSASLAuth)
	enforceSchemes  string // --enforce-auth-schemes (zookeeper.enforce.auth.enabled + .schemes)
	allowFailed     bool   // --sasl-allow-failed-clients (zookeeper.allowSaslFailedClients)
	removeHost      bool   // --kerberos-remove-host-from-principal
	removeRealm     bool   // --kerberos-remove-realm-from-principal
	defaultRealm    string // --kerberos-default-realm
	config          *sasl.Config
	enforcedSchemes []string
	// readableBy names who else may read the JAAS file ("group", "others"); "" if nobody.
	readableBy string
}

func (s *saslOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&s.jaasConfig, "sasl-jaas-config", "", "JAAS file whose users turn on SASL DIGEST-MD5 and the sasl scheme; see docs/operating.md, \"Security\"")
	fs.StringVar(&s.jaasSection, "sasl-jaas-section", "Server", "section of --sasl-jaas-config with the users (zookeeper.sasl.serverconfig)")
	fs.StringVar(&s.superUser, "sasl-super-user", "", "SASL principal that also passes every ACL check (zookeeper.superUser)")
	fs.BoolVar(&s.required, "sasl-required", false, "close a connection that sends a request before SASL (zookeeper.sessionRequireClientSASLAuth)")
	fs.StringVar(&s.enforceSchemes, "enforce-auth-schemes", "", "comma-separated schemes (sasl, digest, x509, ip) a connection must hold one of; see docs/operating.md, \"Security\"")
	fs.BoolVar(&s.allowFailed, "sasl-allow-failed-clients", false, "keep a client whose SASL failed, unauthenticated (zookeeper.allowSaslFailedClients)")
	fs.BoolVar(&s.removeHost, "kerberos-remove-host-from-principal", false, "drop service/host@REALM's host from the sasl identity (zookeeper.kerberos.removeHostFromPrincipal)")
	fs.BoolVar(&s.removeRealm, "kerberos-remove-realm-from-principal", false, "drop the default realm from the sasl identity (zookeeper.kerberos.removeRealmFromPrincipal)")
	fs.StringVar(&s.defaultRealm, "kerberos-default-realm", "", "default Kerberos realm (krb5.conf's default_realm) for the principal mapping")
}

// check reads the JAAS file and validates the combination of flags. x509 says whether clients
// can hold x509 identities.
func (s *saslOptions) check(x509 bool) error {
	if s.jaasConfig != "" {
		j, err := sasl.ReadJAAS(s.jaasConfig)
		if err != nil {
			return fmt.Errorf("--sasl-jaas-config: %w", err)
		}
		users, err := j.ServerUsers(s.jaasSection)
		if err != nil {
			return fmt.Errorf("--sasl-jaas-config: %w", err)
		}
		if len(users) == 0 {
			return fmt.Errorf("--sasl-jaas-config: section %s has no user_<name> option: nobody could authenticate", s.jaasSection)
		}
		if fi, err := os.Stat(s.jaasConfig); err == nil {
			switch mode := fi.Mode().Perm(); {
			case mode&0o004 != 0:
				s.readableBy = "others"
			case mode&0o040 != 0:
				s.readableBy = "group"
			}
		}
		s.config = &sasl.Config{Users: users, Principal: sasl.PrincipalMapping{
			RemoveHost: s.removeHost, RemoveRealm: s.removeRealm, DefaultRealm: s.defaultRealm}}
	} else if s.superUser != "" || s.required || s.allowFailed || s.removeHost || s.removeRealm || s.defaultRealm != "" {
		return errors.New("--sasl-super-user, --sasl-required, --sasl-allow-failed-clients and the --kerberos-* flags need --sasl-jaas-config")
	}
	if s.required && s.enforceSchemes != "" {
		return errors.New("--sasl-required enforces the sasl scheme alone; give it or --enforce-auth-schemes, not both")
	}
	if s.required {
		s.enforcedSchemes = []string{"sasl"}
	}
	for _, scheme := range strings.Split(s.enforceSchemes, ",") {
		scheme = strings.TrimSpace(scheme)
		switch {
		case scheme == "" && s.enforceSchemes == "":
			continue
		case scheme == "digest", scheme == "ip":
		case scheme == "sasl" && s.config != nil:
		case scheme == "x509" && x509:
		default:
			return fmt.Errorf("--enforce-auth-schemes: authentication scheme %q is not available (sasl needs --sasl-jaas-config, x509 --tls-ca)", scheme)
		}
		if !slices.Contains(s.enforcedSchemes, scheme) {
			s.enforcedSchemes = append(s.enforcedSchemes, scheme)
		}
	}
	return nil
}

// on reports whether SASL is on (the store then accepts sasl ACL ids).
func (s *saslOptions) on() bool { return s.config != nil }

// auth is the server's AuthConfig.
func (s *saslOptions) auth() zetcd.AuthConfig {
	a := zetcd.AuthConfig{SASLSuperUser: s.superUser, EnforceSchemes: s.enforcedSchemes, AllowSASLFailedClients: s.allowFailed}
	if cfg := s.config; cfg != nil {
		a.NewSASLServer = func() zetcd.SASLServer { return cfg.NewDigestMD5() }
	}
	return a
}

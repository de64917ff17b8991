package sasl

import (
	"errors"
	"strings"
)

// PrincipalMapping is how ZooKeeper's SaslServerCallbackHandler turns the authenticated name
// into the authorization id of the connection (the id of sasl:<id>): the name is read as a
// Kerberos principal service[/host][@REALM], shortened by the auth_to_local rules (ZooKeeper's
// default, DEFAULT: a principal of the default realm shortens to its service; no other rules
// are supported here), then the host and the realm are put back unless removed:
//
//	short [ "/" host ]  [ "@" realm ]
//
// When shortening fails (a realm other than the default realm), ZooKeeper keeps the
// authorization id the client asked for, or else the authenticated name, unchanged.
type PrincipalMapping struct {
	// RemoveHost is zookeeper.kerberos.removeHostFromPrincipal.
	RemoveHost bool
	// RemoveRealm is zookeeper.kerberos.removeRealmFromPrincipal.
	RemoveRealm bool
	// DefaultRealm is the default realm of the Kerberos configuration (krb5.conf's
	// default_realm); ZooKeeper uses "" when there is no Kerberos configuration.
	DefaultRealm string
}

// KerberosName is a principal split as ZooKeeper's KerberosName splits it: a name matching
// service[/host]@realm (no '/' or '@' inside the parts) has those parts; any other name without
// '@' is all service (so "a/b", without a realm, has no host); any other name with '@' is not a
// Kerberos name.
type KerberosName struct {
	Service  string
	Host     string
	HasHost  bool
	Realm    string
	HasRealm bool
}

var errMalformedName = errors.New("malformed Kerberos name")

// ParseKerberosName splits name (ZooKeeper's new KerberosName(name)).
func ParseKerberosName(name string) (KerberosName, error) {
	at := strings.LastIndexByte(name, '@')
	if at < 0 {
		return KerberosName{Service: name}, nil
	}
	before, realm := name[:at], name[at+1:]
	if strings.ContainsAny(realm, "/@") {
		return KerberosName{}, errMalformedName
	}
	service, host, hasHost := strings.Cut(before, "/")
	if strings.ContainsAny(service, "@") || strings.ContainsAny(host, "/@") {
		return KerberosName{}, errMalformedName
	}
	return KerberosName{Service: service, Host: host, HasHost: hasHost, Realm: realm, HasRealm: true}, nil
}

// ValidName reports whether id is a valid id of the sasl ACL scheme
// (SASLAuthenticationProvider.isValid: a Kerberos name).
func ValidName(id string) bool {
	_, err := ParseKerberosName(id)
	return err == nil
}

// shortName is KerberosName.getShortName with the DEFAULT rule alone.
func (m PrincipalMapping) shortName(k KerberosName) (string, bool) {
	if !k.HasHost && !k.HasRealm {
		return k.Service, true
	}
	if k.Realm == m.DefaultRealm {
		return k.Service, true
	}
	return "", false
}

// authorize is SaslServerCallbackHandler.handleAuthorizeCallback followed by the JDK's
// AuthorizeCallback.getAuthorizedID: the canonical name of authcID, or authzID unchanged when
// the rules do not apply.
func (m PrincipalMapping) authorize(authcID, authzID string) (string, error) {
	k, err := ParseKerberosName(authcID)
	if err != nil {
		return "", runtimef("%v: %s", err, authcID)
	}
	short, ok := m.shortName(k)
	if !ok {
		return authzID, nil
	}
	id := short
	if !m.RemoveHost && k.HasHost {
		id += "/" + k.Host
	}
	if !m.RemoveRealm && k.HasRealm {
		id += "@" + k.Realm
	}
	return id, nil
}

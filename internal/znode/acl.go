package znode

import (
	"crypto/sha1"
	"encoding/base64"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/zetcd/zetcd/encoding"
)

// ACLs and authentication as ZooKeeper 3.9 does them (ProviderRegistry and its providers),
// without etcd: the identities of a connection, the permission check, the digest, ip, x509 and
// sasl schemes, and the masking of getACL. Every rule here was checked against ZooKeeper 3.9.6;
// where ZooKeeper's answer is surprising, the comment says so.

// Scheme names.
const (
	SchemeWorld  = "world"
	SchemeAuth   = "auth"
	SchemeDigest = "digest"
	SchemeIP     = "ip"
	SchemeX509   = "x509"
	SchemeSASL   = "sasl"
	SchemeSuper  = "super"
)

// Providers says which schemes besides world, digest and ip the server has a provider for
// (ZooKeeper's authProvider registry): an ACL may name ids of such a scheme only when its
// provider is there.
type Providers struct {
	// X509: TLS client certificates (x509:<subject DN>).
	X509 bool
	// SASL: SASL authentication (sasl:<principal>), ZooKeeper's SASLAuthenticationProvider.
	SASL bool
}

// Identities is the set of identities one connection holds (ZooKeeper's ServerCnxn.authInfo):
// ip:<client address> from the start, x509:<subject> for a verified TLS client certificate,
// whatever auth packets add, and sasl:<principal> (with super: for the SASL super user) after a
// SASL exchange. Identities are never removed.
//
// ZooKeeper keeps them in a ConcurrentHashMap-backed set, so whoAmI lists them, and the "auth"
// ACL scheme expands to them, in that map's iteration order, not in the order they were added;
// ids reproduces that order (javaIDSet).
//
// mu guards ids: the session's executor adds identities while the watch feed checks them.
type Identities struct {
	mu  sync.Mutex
	ids javaIDSet
}

// add adds id unless the connection holds it already.
func (a *Identities) Add(id encoding.ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids.add(id)
}

// list returns the identities in ZooKeeper's order.
func (a *Identities) List() []encoding.ID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids.list()
}

// authenticated returns the identities that the "auth" ACL scheme expands to, in ZooKeeper's
// order: those of a provider that counts as authenticated (digest, x509, sasl), not ip, and not
// super (which has no provider).
func (a *Identities) Authenticated() []encoding.ID {
	var out []encoding.ID
	for _, id := range a.List() {
		if id.Scheme == SchemeDigest || id.Scheme == SchemeX509 || id.Scheme == SchemeSASL {
			out = append(out, id)
		}
	}
	return out
}

// allowed is ZooKeeper's checkACL: an empty ACL allows everything, the super identity bypasses
// every check, and otherwise some entry holding one of the bits of perm must be world:anyone or
// match one of the connection's identities of its scheme (digest and x509 by equality, ip by
// address prefix, sasl by equality or when the connection's principal is "super": ZooKeeper's
// SASLAuthenticationProvider lets the SASL user named super match every sasl entry). Entries of schemes without a provider (there are none once FixupACL has
// run) match nothing. A nil Identities is a connection that holds nothing.
func (a *Identities) Allowed(acl []encoding.ACL, perm encoding.Perm) bool {
	if len(acl) == 0 {
		return true
	}
	if a == nil {
		a = &Identities{}
	}
	// Called for every watch event delivered: no copy of the identities.
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids.has(SchemeSuper) {
		return true
	}
	for _, e := range acl {
		if e.Perms&perm == 0 {
			continue
		}
		if e.ID.Scheme == SchemeWorld && e.ID.ID == "anyone" {
			return true
		}
		for id := range a.ids.all {
			if id.Scheme != e.ID.Scheme {
				continue
			}
			switch id.Scheme {
			case SchemeDigest, SchemeX509:
				if id.ID == e.ID.ID {
					return true
				}
			case SchemeIP:
				if ipMatches(id.ID, e.ID.ID) {
					return true
				}
			case SchemeSASL:
				if id.ID == "super" || id.ID == e.ID.ID {
					return true
				}
			}
		}
	}
	return false
}

// isSuper reports whether the connection holds the super identity.
func (a *Identities) IsSuper() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids.has(SchemeSuper)
}

// DigestIDs returns the identities a digest auth packet adds: digest:<user>:<base64 sha1> and,
// first, super: when that digest is the configured superDigest. ZooKeeper's digest provider
// refuses no bytes (only a null buffer, which the caller sees): any are "user:password", decoded
// as Java decodes them (no colon: the whole string is the user and the password is empty of
// meaning; the digest covers the whole string).
func DigestIDs(auth []byte, superDigest string) []encoding.ID {
	d := generateDigest(encoding.JavaString(auth))
	var out []encoding.ID
	if superDigest != "" && d == superDigest {
		out = append(out, encoding.ID{Scheme: SchemeSuper, ID: ""})
	}
	return append(out, encoding.ID{Scheme: SchemeDigest, ID: d})
}

// generateDigest is DigestAuthenticationProvider.generateDigest: the text before the first
// colon, a colon, and the base64 SHA-1 of the whole "user:password" string (UTF-8).
func generateDigest(userPassword string) string {
	user, _, _ := strings.Cut(userPassword, ":")
	sum := sha1.Sum([]byte(userPassword))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// DigestID returns the id of the digest scheme for user and password, the value ACLs and
// --super-digest name: user:BASE64(SHA1("user:password")).
func DigestID(user, password string) string { return generateDigest(user + ":" + password) }

// UserOf is the "user" whoAmI reports for an identity (AuthenticationProvider.getUserName):
// the text before the first colon for digest, the id itself for ip, x509 and sasl, "" for super.
func UserOf(id encoding.ID) string {
	switch id.Scheme {
	case SchemeDigest:
		user, _, _ := strings.Cut(id.ID, ":")
		return user
	case SchemeSuper:
		return ""
	}
	return id.ID
}

// MaskACL returns acl as getACL shows it to a caller without ADMIN on the node: every digest
// id with its hash replaced by "x" (Java's id.replaceAll(":.*", ":x")).
func MaskACL(acl []encoding.ACL) []encoding.ACL {
	out := make([]encoding.ACL, len(acl))
	for i, e := range acl {
		if e.ID.Scheme == SchemeDigest {
			e.ID.ID = maskDigest(e.ID.ID)
		}
		out[i] = e
	}
	return out
}

// maskDigest replaces every match of the Java regex ":.*" by ":x". Java's "." stops at line
// terminators, so a digest id with a newline is masked line by line.
func maskDigest(id string) string {
	var b strings.Builder
	rs := []rune(id)
	for i := 0; i < len(rs); i++ {
		if rs[i] != ':' {
			b.WriteRune(rs[i])
			continue
		}
		b.WriteString(":x")
		for i+1 < len(rs) && !isJavaLineTerminator(rs[i+1]) {
			i++
		}
	}
	return b.String()
}

func isJavaLineTerminator(r rune) bool {
	return r == '\n' || r == '\r' || r == '\u0085' || r == '\u2028' || r == '\u2029'
}

// validACLID reports whether id is valid for scheme in an ACL (FixupACL): the provider's
// isValid. x509 and sasl are schemes only when their providers are there.
func validACLID(scheme, id string, p Providers) bool {
	switch scheme {
	case SchemeDigest:
		return validDigestID(id)
	case SchemeIP:
		return validIPID(id)
	case SchemeX509:
		return p.X509 && validX509ID(id)
	case SchemeSASL:
		return p.SASL && validSASLID(id)
	}
	return false
}

// validSASLID is SASLAuthenticationProvider.isValid: id parses as ZooKeeper's KerberosName,
// that is, it matches service[/host]@realm with no '/' or '@' inside the parts, or has no '@'.
func validSASLID(id string) bool {
	at := strings.LastIndexByte(id, '@')
	if at < 0 {
		return true
	}
	service, host, _ := strings.Cut(id[:at], "/")
	return !strings.ContainsAny(id[at+1:], "/") && !strings.ContainsAny(service, "@") && !strings.ContainsAny(host, "/@")
}

// validX509ID accepts a distinguished name as an RFC 2253 string: one or more
// comma-separated attribute=value pairs. ZooKeeper parses it with javax.security.auth.x500;
// this is a looser check of the same shape.
func validX509ID(id string) bool {
	if strings.TrimSpace(id) == "" {
		return false
	}
	for _, rdn := range splitUnescaped(id, ',') {
		for _, atv := range splitUnescaped(rdn, '+') {
			k, _, ok := strings.Cut(atv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return false
			}
		}
	}
	return true
}

// splitUnescaped splits s at sep where sep is not escaped with a backslash.
func splitUnescaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// The ip scheme, as IPAuthenticationProvider parses it (checked against ZooKeeper 3.9.6): an
// id is an address with an optional "/bits" prefix length. An address containing ':' is IPv6:
// eight ':'-separated hex segments, or fewer around one "::" (no zone, no embedded IPv4); else,
// containing '.', IPv4: four decimal parts 0-255. Numbers are read with Java's Integer.parseInt,
// so "01.2.3.4", "+1.2.3.4" and "1.2.3.4/+8" are valid and "-0" is a valid zero.

// validIPID is IPAuthenticationProvider.isValid.
func validIPID(id string) bool {
	addr, bitsText, hasBits := strings.Cut(id, "/")
	b := ipBytes(addr)
	if b == nil {
		return false
	}
	if hasBits {
		bits, ok := javaParseInt(bitsText, 10)
		if !ok || bits < 0 || int(bits) > 8*len(b) {
			return false
		}
	}
	return true
}

// ipMatches is IPAuthenticationProvider.matches: whether the client address client (as
// RemoteIP spells it) lies in the ACL's address prefix expr.
func ipMatches(client, expr string) bool {
	addr, bitsText, hasBits := strings.Cut(expr, "/")
	want := ipBytes(addr)
	if want == nil {
		return false
	}
	bits := 8 * len(want)
	if hasBits {
		n, ok := javaParseInt(bitsText, 10)
		if !ok || n < 0 || int(n) > 8*len(want) {
			return false
		}
		bits = int(n)
	}
	got := ipBytes(client)
	if got == nil {
		return false
	}
	maskBits(want, bits)
	maskBits(got, bits)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// maskBits clears every bit of b after the first bits.
func maskBits(b []byte, bits int) {
	for i := bits / 8; i < len(b); i++ {
		if i == bits/8 {
			b[i] &= byte(^((1 << (8 - bits%8)) - 1))
		} else {
			b[i] = 0
		}
	}
}

// ipBytes parses an address the way IPAuthenticationProvider.addr2Bytes does; nil if invalid.
func ipBytes(s string) []byte {
	switch {
	case strings.Contains(s, ":"):
		return ipv6Bytes(s)
	case strings.Contains(s, "."):
		return ipv4Bytes(s)
	}
	return nil
}

func ipv4Bytes(s string) []byte {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil
	}
	out := make([]byte, 4)
	for i, p := range parts {
		v, ok := javaParseInt(p, 10)
		if !ok || v < 0 || v > 255 {
			return nil
		}
		out[i] = byte(v)
	}
	return out
}

func ipv6Bytes(s string) []byte {
	halves := strings.Split(s, "::")
	var left, right []string
	switch len(halves) {
	case 1:
		left = strings.Split(halves[0], ":")
		if len(left) != 8 {
			return nil
		}
	case 2:
		if halves[0] != "" {
			left = strings.Split(halves[0], ":")
		}
		if halves[1] != "" {
			right = strings.Split(halves[1], ":")
		}
		if len(left)+len(right) >= 8 {
			return nil
		}
	default:
		return nil
	}
	out := make([]byte, 16)
	put := func(at int, segs []string) bool {
		for _, seg := range segs {
			if seg == "" || len(utf16.Encode([]rune(seg))) > 4 {
				return false
			}
			v, ok := javaParseInt(seg, 16)
			if !ok {
				return false
			}
			out[at], out[at+1] = byte(v>>8), byte(v)
			at += 2
		}
		return true
	}
	if !put(0, left) || !put(16-2*len(right), right) {
		return nil
	}
	return out
}

// javaParseInt is Java's Integer.parseInt for ASCII digits: an optional sign, at least one
// digit of the radix, and a value that fits in an int32.
func javaParseInt(s string, radix int) (int32, bool) {
	if s == "" {
		return 0, false
	}
	neg := false
	switch s[0] {
	case '+', '-':
		neg = s[0] == '-'
		s = s[1:]
		if s == "" {
			return 0, false
		}
	}
	var v int64
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i])
		if d < 0 || d >= radix {
			return 0, false
		}
		v = v*int64(radix) + int64(d)
		if v > 1<<31 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	if v > 1<<31-1 || v < -1<<31 {
		return 0, false
	}
	return int32(v), true
}

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return -1
}

// javaIDSet is a set of identities that iterates in the order of Java's
// ConcurrentHashMap<Id, Boolean> key set, which is how ZooKeeper keeps a connection's
// identities: a table of 16 bins (doubling when the count reaches 3/4 of it), each identity in
// bin hash & (n-1) where hash spreads the jute Id.hashCode, bins iterated in index order and
// each bin in insertion order, and the bin split of a resize (which keeps the tail run whose
// bit agrees and puts the nodes before it in reverse order) reproduced. Not reproduced: the
// extra resizes a bin of 8 or more colliding identities causes, which needs that many
// identities with nearly equal hashes.
//
// A connection holds one identity (ip:) and seldom more, so the first is kept without the
// table, which costs 400 bytes a connection and is made with the second.
type javaIDSet struct {
	first hashedID     // the only identity, while bins is nil and count is 1
	bins  [][]hashedID // nil for fewer than two identities
	count int
}

type hashedID struct {
	hash int32
	id   encoding.ID
}

func (s *javaIDSet) add(id encoding.ID) {
	h := spreadHash(javaIDHash(id))
	if s.bins == nil {
		switch {
		case s.count == 0:
			s.first, s.count = hashedID{hash: h, id: id}, 1
			return
		case s.first.id == id:
			return
		}
		s.bins = make([][]hashedID, 16)
		s.bins[int(s.first.hash)&15] = []hashedID{s.first}
		s.first = hashedID{}
	}
	i := int(h) & (len(s.bins) - 1)
	for _, e := range s.bins[i] {
		if e.id == id {
			return
		}
	}
	s.bins[i] = append(s.bins[i], hashedID{hash: h, id: id})
	s.count++
	if s.count >= len(s.bins)-len(s.bins)/4 {
		s.resize()
	}
}

// resize doubles the table as ConcurrentHashMap.transfer does.
func (s *javaIDSet) resize() {
	n := len(s.bins)
	next := make([][]hashedID, 2*n)
	for i, bin := range s.bins {
		if len(bin) == 0 {
			continue
		}
		bit := func(e hashedID) int { return int(e.hash) & n }
		last := 0 // start of the tail run whose entries all have the same bit
		for k := 1; k < len(bin); k++ {
			if bit(bin[k]) != bit(bin[k-1]) {
				last = k
			}
		}
		var lo, hi []hashedID
		if bit(bin[last]) == 0 {
			lo = append(lo, bin[last:]...)
		} else {
			hi = append(hi, bin[last:]...)
		}
		for k := 0; k < last; k++ {
			if bit(bin[k]) == 0 {
				lo = append([]hashedID{bin[k]}, lo...)
			} else {
				hi = append([]hashedID{bin[k]}, hi...)
			}
		}
		next[i], next[i+n] = lo, hi
	}
	s.bins = next
}

// has reports whether the set holds an identity of scheme.
func (s *javaIDSet) has(scheme string) bool {
	for id := range s.all {
		if id.Scheme == scheme {
			return true
		}
	}
	return false
}

func (s *javaIDSet) list() []encoding.ID {
	out := make([]encoding.ID, 0, s.count)
	for id := range s.all {
		out = append(out, id)
	}
	return out
}

// all yields the identities in ZooKeeper's order.
func (s *javaIDSet) all(yield func(encoding.ID) bool) {
	if s.bins == nil {
		if s.count == 1 {
			yield(s.first.id)
		}
		return
	}
	for _, bin := range s.bins {
		for _, e := range bin {
			if !yield(e.id) {
				return
			}
		}
	}
}

// javaIDHash is the jute-generated Id.hashCode.
func javaIDHash(id encoding.ID) int32 {
	h := int32(17)
	h = 37*h + javaStringHash(id.Scheme)
	h = 37*h + javaStringHash(id.ID)
	return h
}

// javaStringHash is String.hashCode over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// spreadHash is ConcurrentHashMap.spread.
func spreadHash(h int32) int32 {
	return (h ^ int32(uint32(h)>>16)) & 0x7fffffff
}

// RemoteIP is the address part of a client address as ZooKeeper's ip scheme spells it: Java's
// InetAddress.getHostAddress, which writes IPv6 addresses as eight groups without "::"
// ("0:0:0:0:0:0:0:1"), followed by "%zone" when scoped.
func RemoteIP(a net.Addr) string {
	switch a := a.(type) {
	case nil:
		return ""
	case *net.TCPAddr:
		if v4 := a.IP.To4(); v4 != nil {
			return v4.String()
		}
		if len(a.IP) != net.IPv6len {
			return a.IP.String()
		}
		groups := make([]string, 8)
		for i := range groups {
			groups[i] = strconv.FormatUint(uint64(a.IP[2*i])<<8|uint64(a.IP[2*i+1]), 16)
		}
		host := strings.Join(groups, ":")
		if a.Zone != "" {
			host += "%" + a.Zone
		}
		return host
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// FixupACL validates the ACL of a create or setACL and expands the "auth" scheme, the way
// ZooKeeper 3.9's PrepRequestProcessor.fixupACL does (checked against 3.9.6):
//   - exact duplicates are removed from the whole list first (the first one stays), and an
//     empty list is InvalidACL;
//   - world:anyone is kept; any other world id is InvalidACL;
//   - auth:<anything> becomes one entry per authenticated identity of the caller (authIDs, in
//     ZooKeeper's order), with no further de-duplication, so auth next to the caller's own
//     digest id stores that id twice; without one it is InvalidACL;
//   - digest, ip (and x509 and sasl with their providers, p) ids must be valid for their
//     scheme; any other scheme (super, ...) is InvalidACL.
//
// A scheme or id that was null on the wire (encoding.NullString) is answered as ZooKeeper's
// Java code answers it (javaNull): InvalidACL, MarshallingError where that code dereferences
// the null, or, for auth's id, nothing at all. A failure is encoding.ErrInvalidACL or
// encoding.ErrMarshallingError.
//
// A list it does not change (no duplicate, no auth) is returned itself, not a copy.
func FixupACL(acl []encoding.ACL, authIDs []encoding.ID, p Providers) ([]encoding.ACL, encoding.ErrCode) {
	unique := 0
	for i, a := range acl {
		dup, code := javaDuplicate(acl[:i], a)
		if code != 0 {
			return nil, code
		}
		if !dup {
			unique++
		}
	}
	if unique == 0 {
		return nil, encoding.ErrInvalidACL
	}
	expands := false
	for i, a := range acl {
		if slices.Contains(acl[:i], a) { // javaDuplicate: the loop above met no null
			continue
		}
		switch {
		case a.ID.Scheme == encoding.NullString:
			return nil, encoding.ErrInvalidACL
		case a.ID.Scheme == SchemeWorld && a.ID.ID == encoding.NullString:
			return nil, encoding.ErrMarshallingError
		case a.ID.Scheme == SchemeWorld && a.ID.ID == "anyone":
		case a.ID.Scheme == SchemeAuth:
			if len(authIDs) == 0 {
				return nil, encoding.ErrInvalidACL
			}
			expands = true
		case a.ID.ID == encoding.NullString && hasProvider(a.ID.Scheme, p):
			return nil, encoding.ErrMarshallingError
		case validACLID(a.ID.Scheme, a.ID.ID, p):
		default:
			return nil, encoding.ErrInvalidACL
		}
	}
	if unique == len(acl) && !expands {
		return acl, 0
	}
	out := make([]encoding.ACL, 0, unique+len(authIDs))
	for i, a := range acl {
		switch {
		case slices.Contains(acl[:i], a):
		case a.ID.Scheme == SchemeAuth:
			for _, id := range authIDs {
				out = append(out, encoding.ACL{Perms: a.Perms, ID: id})
			}
		default:
			out = append(out, a)
		}
	}
	return out, 0
}

// javaDuplicate reports whether a equals an entry of before, as ZooKeeper's removeDuplicates
// finds it with Java's ACL.equals: perms, then the scheme, then the id, each compared as
// a's.equals(the other's). That dereferences a's scheme when the perms match and a's id when
// the schemes match too, so a null there (encoding.NullString) is MarshallingError; a null in
// the other entry is only unequal.
func javaDuplicate(before []encoding.ACL, a encoding.ACL) (bool, encoding.ErrCode) {
	for _, b := range before {
		switch {
		case a.Perms != b.Perms:
		case a.ID.Scheme == encoding.NullString:
			return false, encoding.ErrMarshallingError
		case a.ID.Scheme != b.ID.Scheme:
		case a.ID.ID == encoding.NullString:
			return false, encoding.ErrMarshallingError
		case a.ID.ID == b.ID.ID:
			return true, 0
		}
	}
	return false, 0
}

// hasProvider reports whether ZooKeeper has an authentication provider for scheme, whose
// isValid then gets the id: each of them dereferences a null id.
func hasProvider(scheme string, p Providers) bool {
	switch scheme {
	case SchemeDigest, SchemeIP:
		return true
	case SchemeX509:
		return p.X509
	case SchemeSASL:
		return p.SASL
	}
	return false
}

// FixupACL runs the package's FixupACL for a caller with these identities, which are listed
// (Authenticated) only if acl names the auth scheme.
func (a *Identities) FixupACL(acl []encoding.ACL, p Providers) ([]encoding.ACL, encoding.ErrCode) {
	var authIDs []encoding.ID
	if slices.ContainsFunc(acl, func(x encoding.ACL) bool { return x.ID.Scheme == SchemeAuth }) {
		authIDs = a.Authenticated()
	}
	return FixupACL(acl, authIDs, p)
}

// validDigestID mirrors DigestAuthenticationProvider.isValid: Java's id.split(":") (which drops
// trailing empty strings) must give exactly two parts.
func validDigestID(id string) bool {
	parts := strings.Split(id, ":")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return len(parts) == 2
}

package znode

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zetcd/zetcd/encoding"
)

func digestID(userPassword string) encoding.ID {
	return encoding.ID{Scheme: SchemeDigest, ID: generateDigest(userPassword)}
}

// TestAuthInfoOrder: identities come out in the order ZooKeeper 3.9.6's ConcurrentHashMap keeps
// them, as whoAmI showed it for these auth packets (in this order) on one connection.
func TestAuthInfoOrder(t *testing.T) {
	var a Identities
	a.Add(encoding.ID{Scheme: SchemeIP, ID: "127.0.0.1"})
	for _, up := range []string{"alice:pw", "alice:pw", "bob", "", "carol:pw:x"} {
		for _, id := range DigestIDs([]byte(up), DigestID("super", "secret")) {
			a.Add(id)
		}
	}
	a.Add(encoding.ID{Scheme: SchemeIP, ID: "127.0.0.1"})
	for _, id := range DigestIDs([]byte("super:secret"), generateDigest("super:secret")) {
		a.Add(id)
	}
	var got []string
	for _, id := range a.List() {
		got = append(got, id.Scheme+":"+UserOf(id))
	}
	want := []string{"digest:bob", "digest:carol", "super:", "digest:super", "digest:", "ip:127.0.0.1", "digest:alice"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	// The "auth" scheme expands to the authenticated ones, in the same order (ZooKeeper 3.9.6
	// stored bob, super, alice for this set).
	var b Identities
	for _, id := range []encoding.ID{{Scheme: SchemeIP, ID: "127.0.0.1"}, digestID("alice:pw"), digestID("bob:pw"), {Scheme: SchemeSuper}, digestID("super:secret")} {
		b.Add(id)
	}
	if got, want := b.Authenticated(), []encoding.ID{digestID("bob:pw"), digestID("super:secret"), digestID("alice:pw")}; !slices.Equal(got, want) {
		t.Errorf("authenticated %v, want %v", got, want)
	}
}

// TestJavaIDSetResize: past 12 identities the table doubles and bins split as Java's do; every
// identity is still listed once.
func TestJavaIDSetResize(t *testing.T) {
	var s javaIDSet
	for i := 0; i < 100; i++ {
		s.add(encoding.ID{Scheme: SchemeDigest, ID: fmt.Sprintf("u%d:x", i)})
		s.add(encoding.ID{Scheme: SchemeDigest, ID: fmt.Sprintf("u%d:x", i)})
	}
	if len(s.bins) != 256 || len(s.list()) != 100 {
		t.Fatalf("%d bins, %d ids", len(s.bins), len(s.list()))
	}
	seen := map[encoding.ID]bool{}
	for i, bin := range s.bins {
		for _, e := range bin {
			if int(e.hash)&(len(s.bins)-1) != i || seen[e.id] {
				t.Fatalf("%v misplaced or duplicated", e.id)
			}
			seen[e.id] = true
		}
	}
}

func TestDigest(t *testing.T) {
	// zkCli / DigestAuthenticationProvider.main give these.
	if got, want := DigestID("alice", "pw"), "alice:V55/p2T0OpjQ+low3NVAH4aLvm0="; got != want {
		t.Errorf("DigestID = %s, want %s", got, want)
	}
	if got, want := DigestID("super", "secret"), "super:lK75jTNcA+U9vtVEw5vB51mj/w4="; got != want {
		t.Errorf("DigestID = %s, want %s", got, want)
	}
	if got := DigestIDs([]byte("super:secret"), DigestID("super", "secret")); len(got) != 2 || got[0].Scheme != SchemeSuper {
		t.Errorf("super digest: %v", got)
	}
	if got := DigestIDs([]byte("bob"), ""); len(got) != 1 || UserOf(got[0]) != "bob" {
		t.Errorf("no colon: %v", got)
	}
}

// TestValidIPID: the ip ids ZooKeeper 3.9.6 accepted and refused in setACL.
func TestValidIPID(t *testing.T) {
	valid := []string{"127.0.0.1", "01.2.3.4", "+1.2.3.4", "1.2.3.4/0", "1.2.3.4/32", "1.2.3.4/+8", "1.2.3.4/08",
		"::1", "::1/128", "::", "1:2:3:4:5:6:7:8", "0:0:0:0:0:0:0:1", "1:2:3:4:5:6:7::", "::1:2:3:4:5:6:7", "FE80::1", "::1/64"}
	invalid := []string{"1.2.3", "1.2.3.4.5", "1.2.3.256", "1.2.3.4/33", "1.2.3.4/-1", "1.2.3.4/", "1.2.3.4/a", "1.2.3.4/8/9",
		"::1/129", "fe80::1%eth0", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8:9", "1::2::3", "[::1]", "abcde::1", "g::1",
		"1.2.3.4 ", " 1.2.3.4", "", "localhost", "1.2.3.-4", "1..2.3", "1.2.3.4.", "0x1.2.3.4", "1:2:3:4:5:6:1.2.3.4"}
	for _, id := range valid {
		if !validIPID(id) {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range invalid {
		if validIPID(id) {
			t.Errorf("%q accepted", id)
		}
	}
}

func TestIPMatches(t *testing.T) {
	cases := []struct {
		client, expr string
		want         bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "127.0.0.2", false},
		{"127.0.0.1", "127.0.0.0/8", true},
		{"127.0.0.1", "1.2.3.4/0", true},
		{"10.1.2.3", "10.1.0.0/15", true},
		{"10.3.2.3", "10.1.0.0/15", false},
		{"127.0.0.1", "01.2.3.4/+0", true},
		{"0:0:0:0:0:0:0:1", "::1", true},
		{"0:0:0:0:0:0:0:1", "::/0", true},
		{"0:0:0:0:0:0:0:1", "::1/129", false},
		{"fe80:0:0:0:0:0:0:1%eth0", "fe80::/16", false}, // Java's scoped address does not parse
		{"127.0.0.1", "::/0", false},                    // families differ
		{"2001:db8:0:0:0:0:0:1", "2001:DB8::/32", true},
	}
	for _, c := range cases {
		if got := ipMatches(c.client, c.expr); got != c.want {
			t.Errorf("ipMatches(%q, %q) = %v", c.client, c.expr, got)
		}
	}
}

func TestAllowed(t *testing.T) {
	acl := func(perms encoding.Perm, scheme, id string) encoding.ACL {
		return encoding.ACL{Perms: perms, ID: encoding.ID{Scheme: scheme, ID: id}}
	}
	var anon, alice, super Identities
	anon.Add(encoding.ID{Scheme: SchemeIP, ID: "127.0.0.1"})
	alice.Add(encoding.ID{Scheme: SchemeIP, ID: "127.0.0.1"})
	alice.Add(digestID("alice:pw"))
	super.Add(encoding.ID{Scheme: SchemeSuper})
	aliceOnly := []encoding.ACL{acl(encoding.PermAll, SchemeDigest, DigestID("alice", "pw"))}
	readWorld := []encoding.ACL{acl(encoding.PermRead, SchemeWorld, "anyone"), acl(encoding.PermAdmin, SchemeIP, "127.0.0.0/8")}
	for _, c := range []struct {
		who  *Identities
		acl  []encoding.ACL
		perm encoding.Perm
		want bool
	}{
		{&anon, aliceOnly, encoding.PermRead, false},
		{&alice, aliceOnly, encoding.PermRead, true},
		{&super, aliceOnly, encoding.PermAdmin, true},
		{&anon, nil, encoding.PermWrite, true},
		{nil, nil, encoding.PermWrite, true},
		{nil, aliceOnly, encoding.PermRead, false},
		{&anon, readWorld, encoding.PermRead, true},
		{&anon, readWorld, encoding.PermWrite, false},
		{&anon, readWorld, encoding.PermAdmin, true},
		{&anon, readWorld, encoding.PermRead | encoding.PermWrite, true}, // either bit
	} {
		if got := c.who.Allowed(c.acl, c.perm); got != c.want {
			t.Errorf("allowed(%v, %v) = %v", c.acl, c.perm, got)
		}
	}
}

func TestMaskACL(t *testing.T) {
	in := []encoding.ACL{
		{Perms: 1, ID: encoding.ID{Scheme: SchemeDigest, ID: "alice:V55/p2T0OpjQ+low3NVAH4aLvm0="}},
		{Perms: 1, ID: encoding.ID{Scheme: SchemeDigest, ID: ":b"}},
		{Perms: 1, ID: encoding.ID{Scheme: SchemeDigest, ID: "a:b:"}},
		{Perms: 1, ID: encoding.ID{Scheme: SchemeDigest, ID: "a:b\nc:d"}},
		{Perms: 1, ID: encoding.ID{Scheme: SchemeIP, ID: "10.0.0.0/8"}},
	}
	var got []string
	for _, a := range MaskACL(in) {
		got = append(got, a.ID.ID)
	}
	if want := []string{"alice:x", ":x", "a:x", "a:x\nc:x", "10.0.0.0/8"}; !slices.Equal(got, want) {
		t.Errorf("masked %q, want %q", got, want)
	}
}

// aclEntry is one ACL entry.
func aclEntry(perms encoding.Perm, scheme, id string) encoding.ACL {
	return encoding.ACL{Perms: perms, ID: encoding.ID{Scheme: scheme, ID: id}}
}

// TestFixupACL: the cases ZooKeeper 3.9.6's PrepRequestProcessor.fixupACL answered.
func TestFixupACL(t *testing.T) {
	acl := aclEntry
	world := acl(31, SchemeWorld, "anyone")
	alice := digestID("alice:pw")
	for _, c := range []struct {
		in   []encoding.ACL
		auth []encoding.ID
		want []encoding.ACL // nil: InvalidACL
	}{
		{nil, nil, nil},
		{[]encoding.ACL{}, nil, nil},
		{[]encoding.ACL{world, world}, nil, []encoding.ACL{world}},
		{[]encoding.ACL{acl(1, SchemeWorld, "anyone"), world, acl(1, SchemeWorld, "anyone")}, nil, []encoding.ACL{acl(1, SchemeWorld, "anyone"), world}},
		{[]encoding.ACL{acl(31, SchemeWorld, "Anyone")}, nil, nil},
		{[]encoding.ACL{acl(31, SchemeSuper, "")}, nil, nil},
		{[]encoding.ACL{acl(31, "sasl", "bob")}, nil, nil},
		{[]encoding.ACL{acl(31, SchemeX509, "CN=x")}, nil, nil},
		{[]encoding.ACL{acl(31, SchemeAuth, "")}, nil, nil},
		{[]encoding.ACL{acl(31, SchemeAuth, "")}, []encoding.ID{alice}, []encoding.ACL{{Perms: 31, ID: alice}}},
		{[]encoding.ACL{acl(31, SchemeAuth, ""), acl(31, SchemeAuth, "")}, []encoding.ID{alice}, []encoding.ACL{{Perms: 31, ID: alice}}},
		// Expansion is not de-duplicated against the caller's own id.
		{[]encoding.ACL{{Perms: 31, ID: alice}, acl(31, SchemeAuth, "")}, []encoding.ID{alice}, []encoding.ACL{{Perms: 31, ID: alice}, {Perms: 31, ID: alice}}},
		{[]encoding.ACL{acl(31, SchemeAuth, ""), acl(31, SchemeAuth, "ignored")}, []encoding.ID{alice}, []encoding.ACL{{Perms: 31, ID: alice}, {Perms: 31, ID: alice}}},
		{[]encoding.ACL{acl(31, SchemeDigest, "a")}, nil, nil},
		{[]encoding.ACL{acl(31, SchemeDigest, ":b")}, nil, []encoding.ACL{acl(31, SchemeDigest, ":b")}},
		{[]encoding.ACL{acl(31, SchemeIP, "127.0.0.1"), acl(31, "bogus", "x")}, nil, nil},
		{[]encoding.ACL{acl(-1, SchemeWorld, "anyone")}, nil, []encoding.ACL{acl(-1, SchemeWorld, "anyone")}},
	} {
		got, err := FixupACL(c.in, c.auth, Providers{})
		if c.want == nil {
			if err != encoding.ErrInvalidACL {
				t.Errorf("FixupACL(%v, %v) = %v, %v; want InvalidACL", c.in, c.auth, got, err)
			}
			continue
		}
		if err != 0 || !slices.Equal(got, c.want) {
			t.Errorf("FixupACL(%v, %v) = %v, %v; want %v", c.in, c.auth, got, err, c.want)
		}
	}
	if _, err := FixupACL([]encoding.ACL{acl(31, SchemeX509, "CN=client,O=zetcd")}, nil, Providers{X509: true}); err != 0 {
		t.Errorf("x509 enabled: %v", err)
	}
	// With SASL on, sasl ids that are Kerberos names are valid; the auth scheme expands to the
	// connection's sasl id.
	bob := encoding.ID{Scheme: SchemeSASL, ID: "bob"}
	for _, id := range []string{"bob", "kafka/h1@EXAMPLE.COM", "a@", "@", "x/y", ""} {
		if _, err := FixupACL([]encoding.ACL{acl(31, SchemeSASL, id)}, nil, Providers{SASL: true}); err != 0 {
			t.Errorf("sasl %q: %v", id, err)
		}
	}
	for _, id := range []string{"a@b@c", "a/b/c@R", "a@R/x"} {
		if _, err := FixupACL([]encoding.ACL{acl(31, SchemeSASL, id)}, nil, Providers{SASL: true}); err != encoding.ErrInvalidACL {
			t.Errorf("sasl %q: %v, want InvalidACL", id, err)
		}
	}
	got, err := FixupACL([]encoding.ACL{acl(31, SchemeAuth, "")}, []encoding.ID{bob}, Providers{SASL: true})
	if err != 0 || !slices.Equal(got, []encoding.ACL{{Perms: 31, ID: bob}}) {
		t.Errorf("auth with a sasl id: %v %v", got, err)
	}
}

// TestFixupACLKeepsAnUnchangedList: a list the fixup leaves as it is (no duplicate, no auth) comes
// back itself, with no allocation: every create carries one, mostly world:anyone. A caller's
// identities are listed only for the auth scheme.
func TestFixupACLKeepsAnUnchangedList(t *testing.T) {
	var ip, alice Identities
	ip.Add(encoding.ID{Scheme: SchemeIP, ID: "127.0.0.1"})
	alice.Add(encoding.ID{Scheme: SchemeIP, ID: "127.0.0.1"})
	alice.Add(encoding.ID{Scheme: SchemeDigest, ID: "alice:hash"})
	in := []encoding.ACL{aclEntry(31, SchemeWorld, "anyone"), aclEntry(1, SchemeIP, "10.0.0.1")}
	got, err := ip.FixupACL(in, Providers{})
	if err != 0 || &got[0] != &in[0] || len(got) != len(in) {
		t.Errorf("FixupACL(%v) = %v, %v; want the list itself", in, got, err)
	}
	world := in[:1]
	if n := testing.AllocsPerRun(100, func() { _, _ = ip.FixupACL(world, Providers{}) }); n != 0 {
		t.Errorf("FixupACL(%v): %v allocations, want 0", world, n)
	}
	auth := []encoding.ACL{aclEntry(31, SchemeAuth, ""), aclEntry(1, SchemeIP, "10.0.0.1"), aclEntry(1, SchemeIP, "10.0.0.1")}
	want := []encoding.ACL{{Perms: 31, ID: encoding.ID{Scheme: SchemeDigest, ID: "alice:hash"}}, aclEntry(1, SchemeIP, "10.0.0.1")}
	if got, err := alice.FixupACL(auth, Providers{}); err != 0 || !slices.Equal(got, want) || &got[0] == &auth[0] {
		t.Errorf("FixupACL(%v) for alice = %v, %v; want a new list %v", auth, got, err, want)
	}
	if got, err := ip.FixupACL(auth, Providers{}); err != encoding.ErrInvalidACL {
		t.Errorf("FixupACL(%v) with no authenticated identity = %v, %v; want InvalidACL", auth, got, err)
	}
}

// TestAllowedSASL: a sasl entry matches the connection's sasl id of the same name, and every
// sasl entry matches the SASL principal named super (SASLAuthenticationProvider.matches); the
// super identity passes everything.
func TestAllowedSASL(t *testing.T) {
	acl := []encoding.ACL{{Perms: encoding.PermWrite, ID: encoding.ID{Scheme: SchemeSASL, ID: "bob"}}}
	for _, tc := range []struct {
		ids  []encoding.ID
		want bool
	}{
		{nil, false},
		{[]encoding.ID{{Scheme: SchemeSASL, ID: "bob"}}, true},
		{[]encoding.ID{{Scheme: SchemeSASL, ID: "Bob"}}, false},
		{[]encoding.ID{{Scheme: SchemeSASL, ID: "alice"}}, false},
		{[]encoding.ID{{Scheme: SchemeDigest, ID: "bob"}}, false},
		{[]encoding.ID{{Scheme: SchemeSASL, ID: "super"}}, true},
		{[]encoding.ID{{Scheme: SchemeSuper, ID: ""}}, true},
	} {
		var a Identities
		for _, id := range tc.ids {
			a.Add(id)
		}
		if got := a.Allowed(acl, encoding.PermWrite); got != tc.want {
			t.Errorf("%v: write allowed %v, want %v", tc.ids, got, tc.want)
		}
		if a.Allowed(acl, encoding.PermRead) && len(tc.ids) > 0 && tc.ids[0].Scheme != SchemeSuper {
			t.Errorf("%v: read allowed by a write-only entry", tc.ids)
		}
	}
	if got := UserOf(encoding.ID{Scheme: SchemeSASL, ID: "kafka/h1@R"}); got != "kafka/h1@R" {
		t.Errorf("UserOf sasl: %q", got)
	}
}

// TestFixupACLNulls: a null scheme or id (encoding.NullString) in the request's list, answered as
// ZooKeeper 3.9.6 answered each list (probed over the wire): InvalidACL where its Java code finds
// no provider, MarshallingError where it dereferences the null (comparing a later entry with an
// earlier one of the same perms, world's id, a provider's isValid), and nothing for auth's id.
func TestFixupACLNulls(t *testing.T) {
	const null = encoding.NullString
	acl := aclEntry
	world := acl(31, SchemeWorld, "anyone")
	alice := encoding.ID{Scheme: SchemeDigest, ID: "alice:hash"}
	for _, c := range []struct {
		in   []encoding.ACL
		auth []encoding.ID
		p    Providers
		want encoding.ErrCode
	}{
		{in: []encoding.ACL{acl(31, null, "anyone")}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, null, null)}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, SchemeWorld, null)}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeDigest, null)}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeIP, null)}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeAuth, null)}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, SchemeSASL, null)}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, SchemeSASL, null)}, p: Providers{SASL: true}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeX509, null)}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, SchemeX509, null)}, p: Providers{X509: true}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeSuper, null)}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, "foo", null)}, want: encoding.ErrInvalidACL},
		// Duplicates: a's scheme is compared with an earlier entry of the same perms, its id with
		// one of the same perms and scheme.
		{in: []encoding.ACL{world, acl(31, null, "anyone")}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{world, acl(1, null, "anyone")}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, null, "anyone"), world}, want: encoding.ErrInvalidACL},
		{in: []encoding.ACL{acl(31, null, null), acl(31, null, null)}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeDigest, "a:b"), acl(31, SchemeDigest, null)}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{world, acl(31, SchemeWorld, null)}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(31, SchemeAuth, ""), acl(31, SchemeAuth, null)}, auth: []encoding.ID{alice}, want: encoding.ErrMarshallingError},
		{in: []encoding.ACL{acl(1, SchemeIP, null), world}, want: encoding.ErrMarshallingError},
		// The first entry that fails decides.
		{in: []encoding.ACL{acl(31, "foo", "x"), acl(31, SchemeWorld, null)}, want: encoding.ErrInvalidACL},
	} {
		if got, code := FixupACL(c.in, c.auth, c.p); code != c.want {
			t.Errorf("FixupACL(%q, %v, %+v) = %v, %v; want %v", c.in, c.auth, c.p, got, code, c.want)
		}
	}
	// auth's id is not looked at: a null one expands as an empty one does.
	for _, in := range [][]encoding.ACL{
		{acl(31, SchemeAuth, null)},
		{acl(31, SchemeAuth, null), acl(31, SchemeAuth, "")},
	} {
		want := slices.Repeat([]encoding.ACL{{Perms: 31, ID: alice}}, len(in))
		if got, code := FixupACL(in, []encoding.ID{alice}, Providers{}); code != 0 || !slices.Equal(got, want) {
			t.Errorf("FixupACL(%q) for alice = %v, %v; want %v", in, got, code, want)
		}
	}
}

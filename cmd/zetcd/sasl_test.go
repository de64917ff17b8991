package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseSASLFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jaas := write("jaas.conf", `Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="adminsecret"
    user_kafka="kafkasecret";
};
Other { org.apache.zookeeper.server.auth.DigestLoginModule required user_bob="b"; };
`)
	krb := write("krb.conf", `Server { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="zookeeper/h@R"; };`)
	empty := write("empty.conf", `Server { org.apache.zookeeper.server.auth.DigestLoginModule required; };`)

	o, err := parseFlags([]string{"--sasl-jaas-config", jaas, "--sasl-super-user", "super", "--enforce-auth-schemes", "sasl, digest"})
	if err != nil {
		t.Fatal(err)
	}
	if o.sasl.readableBy != "" {
		t.Errorf("a 0600 JAAS file is readable by its %s", o.sasl.readableBy)
	}
	a := o.sasl.auth()
	if a.NewSASLServer == nil || a.SASLSuperUser != "super" || !slices.Equal(a.EnforceSchemes, []string{"sasl", "digest"}) || !o.sasl.on() {
		t.Errorf("auth config %+v", a)
	}
	if u := o.sasl.config.Users; len(u) != 2 || u["kafka"] != "kafkasecret" {
		t.Errorf("users %v", u)
	}
	o, err = parseFlags([]string{"--sasl-jaas-config", jaas, "--sasl-jaas-section", "Other", "--sasl-required"})
	if err != nil || o.sasl.config.Users["bob"] != "b" || !slices.Equal(o.sasl.auth().EnforceSchemes, []string{"sasl"}) {
		t.Errorf("--sasl-jaas-section Other --sasl-required: %+v %v", o.sasl, err)
	}
	if o, err := parseFlags(nil); err != nil || o.sasl.on() || o.sasl.auth().NewSASLServer != nil {
		t.Errorf("defaults: SASL on %v, %v", o.sasl.on(), err)
	}
	if o, err := parseFlags([]string{"--enforce-auth-schemes", "digest"}); err != nil || !slices.Equal(o.sasl.auth().EnforceSchemes, []string{"digest"}) {
		t.Errorf("--enforce-auth-schemes digest without SASL: %v", err)
	}

	if err := os.Chmod(jaas, 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := parseFlags([]string{"--sasl-jaas-config", jaas}); err != nil || o.sasl.readableBy != "others" {
		t.Errorf("a 0644 JAAS file: readable by %q, %v", o.sasl.readableBy, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sasl-jaas-config", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--sasl-jaas-config", krb}, "GSSAPI"},
		{[]string{"--sasl-jaas-config", empty}, "no user_"},
		{[]string{"--sasl-jaas-config", jaas, "--sasl-jaas-section", "Nope"}, "Nope"},
		{[]string{"--sasl-required"}, "need --sasl-jaas-config"},
		{[]string{"--sasl-super-user", "x"}, "need --sasl-jaas-config"},
		{[]string{"--kerberos-remove-realm-from-principal"}, "need --sasl-jaas-config"},
		{[]string{"--enforce-auth-schemes", "sasl"}, "not available"},
		{[]string{"--enforce-auth-schemes", "x509"}, "not available"},
		{[]string{"--enforce-auth-schemes", "bogus"}, "not available"},
		{[]string{"--sasl-jaas-config", jaas, "--sasl-required", "--enforce-auth-schemes", "digest"}, "not both"},
		{[]string{"--sasl-jaas-config", jaas, "--oracle", "127.0.0.1:2181"}, "--oracle"},
	} {
		if _, err := parseFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

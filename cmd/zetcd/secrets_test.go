package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	testDigest   = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
	testPassword = "etcd-secret-pw"
)

// TestSecretSources: the super digest and etcd's password are read from their flag, their file
// or their environment variable, from exactly one of them.
func TestSecretSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	digestFile := write("digest", testDigest+"\n")
	passwordFile := write("password", testPassword+"\r\n")
	emptyFile := write("empty", "\n")
	etcd := []string{"--endpoints", "http://e:2379", "--etcd-user", "u"}

	for _, tc := range []struct {
		name         string
		args         []string
		env          map[string]string
		digest, pass string // want; "" with bad
		bad          bool
	}{
		{name: "flags", args: append([]string{"--super-digest", testDigest, "--etcd-password", testPassword}, etcd...),
			digest: testDigest, pass: testPassword},
		{name: "files", args: append([]string{"--super-digest-file", digestFile, "--etcd-password-file", passwordFile}, etcd...),
			digest: testDigest, pass: testPassword},
		{name: "environment", args: etcd, env: map[string]string{"ZETCD_SUPER_DIGEST": testDigest, "ZETCD_ETCD_PASSWORD": testPassword},
			digest: testDigest, pass: testPassword},
		{name: "empty environment variables are unset", env: map[string]string{"ZETCD_SUPER_DIGEST": "", "ZETCD_ETCD_PASSWORD": ""}},
		{name: "flag and file", args: []string{"--super-digest", testDigest, "--super-digest-file", digestFile}, bad: true},
		{name: "flag and environment", args: []string{"--super-digest", testDigest}, env: map[string]string{"ZETCD_SUPER_DIGEST": testDigest}, bad: true},
		{name: "file and environment", args: append([]string{"--etcd-password-file", passwordFile}, etcd...), env: map[string]string{"ZETCD_ETCD_PASSWORD": testPassword}, bad: true},
		{name: "missing file", args: []string{"--super-digest-file", filepath.Join(dir, "none")}, bad: true},
		{name: "empty file", args: []string{"--super-digest-file", emptyFile}, bad: true},
		{name: "password from the environment without a user", env: map[string]string{"ZETCD_ETCD_PASSWORD": testPassword}, bad: true},
		{name: "digest from a file, malformed", args: []string{"--super-digest-file", passwordFile}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o, err := parseFlags(tc.args)
			if tc.bad {
				if err == nil {
					t.Fatalf("%v accepted", tc.args)
				}
				if strings.Contains(err.Error(), testDigest) || strings.Contains(err.Error(), testPassword) {
					t.Errorf("the error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.security.superDigest != tc.digest || o.security.etcdPassword != tc.pass {
				t.Errorf("digest %q, password %q; want %q, %q", o.security.superDigest, o.security.etcdPassword, tc.digest, tc.pass)
			}
		})
	}
}

// TestRedactArgs: every form of a secret flag on the command line has its value redacted, and
// nothing else changes.
func TestRedactArgs(t *testing.T) {
	in := []string{"zetcd", "--super-digest", "s1", "-etcd-password=s2", "--super-digest-file", "/f",
		"--etcd-password", "s3", "-super-digest", "s4", "--etcd-user", "u", "--super-digest=s5"}
	want := []string{"zetcd", "--super-digest", "REDACTED", "-etcd-password=REDACTED", "--super-digest-file", "/f",
		"--etcd-password", "REDACTED", "-super-digest", "REDACTED", "--etcd-user", "u", "--super-digest=REDACTED"}
	if got := redactArgs(in); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("redactArgs:\n got %q\nwant %q", got, want)
	}
	if in[2] != "s1" {
		t.Error("redactArgs changed its argument")
	}
}

// TestPprofCmdlineRedacted: /debug/pprof/cmdline shows the command line without the values of
// secret flags.
func TestPprofCmdlineRedacted(t *testing.T) {
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = []string{"zetcd", "--super-digest", testDigest, "--etcd-password=" + testPassword, "--pprof"}
	h := newHTTPHandler(newRegistry(), probes{}, true)
	code, body := get(t, h, "/debug/pprof/cmdline")
	if code != http.StatusOK || strings.Contains(body, testDigest) || strings.Contains(body, testPassword) ||
		body != "zetcd\x00--super-digest\x00REDACTED\x00--etcd-password=REDACTED\x00--pprof" {
		t.Errorf("/debug/pprof/cmdline: %d %q", code, body)
	}
}

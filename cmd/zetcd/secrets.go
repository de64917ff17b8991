package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Secrets. The super user's digest and etcd's password can each be given three ways, at most one
// at a time:
//
//	--super-digest-file FILE     --etcd-password-file FILE     the file's content (one trailing
//	                                                           newline ignored)
//	$ZETCD_SUPER_DIGEST          $ZETCD_ETCD_PASSWORD          the environment variable
//	--super-digest VALUE         --etcd-password VALUE         the flag (visible to every local
//	                                                           user in ps and /proc)
//
// A file (e.g. a systemd credential) or the environment (e.g. systemd's EnvironmentFile) keeps
// the secret out of the command line. zetcd never logs a secret, the four-letter words do not
// show them, and /debug/pprof/cmdline shows the command line with secret flag values redacted.

// secretFlag is one secret and the three ways of giving it.
type secretFlag struct {
	name string  // the flag, without dashes
	env  string  // the environment variable
	dst  *string // where the secret goes
	file *string // the value of the -file flag
}

// secretFlags are the flags whose values are secrets.
func (s *securityOptions) secretFlags() []secretFlag {
	return []secretFlag{
		{name: "super-digest", env: "ZETCD_SUPER_DIGEST", dst: &s.superDigest, file: &s.superDigestFile},
		{name: "etcd-password", env: "ZETCD_ETCD_PASSWORD", dst: &s.etcdPassword, file: &s.etcdPasswordFile},
	}
}

// registerSecrets registers the secret flags and their -file flags; readSecrets then resolves
// them after parsing.
func (s *securityOptions) registerSecrets(fs *flag.FlagSet) {
	help := map[string]string{
		"super-digest":  "ZooKeeper's superDigest, user:BASE64(SHA1(user:password))",
		"etcd-password": "password of --etcd-user",
	}
	for _, f := range s.secretFlags() {
		fs.StringVar(f.dst, f.name, "", fmt.Sprintf("%s; visible in ps: prefer --%s-file or $%s", help[f.name], f.name, f.env))
		fs.StringVar(f.file, f.name+"-file", "", fmt.Sprintf("file holding --%s (one trailing newline ignored); or set $%s", f.name, f.env))
	}
}

// readSecrets sets each secret from the one way it was given: its flag, its file or its
// environment variable (lookupEnv). set reports whether a flag was given on the command line.
func (s *securityOptions) readSecrets(set func(name string) bool, lookupEnv func(string) (string, bool)) error {
	for _, f := range s.secretFlags() {
		env, inEnv := lookupEnv(f.env)
		var given []string
		if set(f.name) {
			given = append(given, "--"+f.name)
		}
		if set(f.name + "-file") {
			given = append(given, "--"+f.name+"-file")
		}
		if inEnv && env != "" {
			given = append(given, "$"+f.env)
		}
		if len(given) > 1 {
			return fmt.Errorf("%s: give one of them", strings.Join(given, " and "))
		}
		switch {
		case set(f.name + "-file"):
			b, err := os.ReadFile(*f.file)
			if err != nil {
				return fmt.Errorf("--%s-file: %w", f.name, err)
			}
			v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			if v == "" {
				return fmt.Errorf("--%s-file %s is empty", f.name, *f.file)
			}
			*f.dst = v
		case inEnv && env != "":
			*f.dst = env
		}
	}
	return nil
}

// redactedSecret replaces a secret's value wherever zetcd shows its command line.
const redactedSecret = "REDACTED"

// redactArgs returns args with the values of secret flags replaced by redactedSecret, in the
// forms the flag package accepts: -name value, --name value, -name=value, --name=value.
func redactArgs(args []string) []string {
	secret := map[string]bool{}
	for _, f := range (&securityOptions{}).secretFlags() {
		secret[f.name] = true
	}
	out := make([]string, len(args))
	copy(out, args)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !secret[name] {
			continue
		}
		if hasValue {
			out[i] = a[:strings.Index(a, "=")+1] + redactedSecret
		} else if i+1 < len(out) {
			out[i+1] = redactedSecret
			i++
		}
	}
	return out
}

// pprofCmdline is net/http/pprof's Cmdline (the command line, arguments separated by NUL
// bytes) with the values of secret flags redacted.
func pprofCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// boom runs zkboom --json with args and returns its report.
func boom(t *testing.T, args ...string) *report {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"--json"}, args...), &out, &errb)
	if code != 0 {
		t.Fatalf("zkboom %v: exit %d, stderr %q", args, code, errb.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("zkboom %v: %v in %q", args, err, out.String())
	}
	return &r
}

const total = 60

// servers are zetcd and real ZooKeeper. Not the cross-checker: concurrent writers on one node
// from several sessions are a race its comparison cannot follow.
var servers = []testenv.Server{{Name: "zetcd", Start: testenv.StartZetcd}, {Name: "zookeeper", Start: testenv.StartZooKeeper}}

func TestOps(t *testing.T) {
	for _, s := range servers {
		t.Run(s.Name, func(t *testing.T) {
			addr := s.Start(t)
			for _, op := range ops {
				r := boom(t, "--endpoints", addr, "--conns", "2", "--clients", "3", "--total", "60", "--keys", "20", op)
				if r.Requests != total || r.Op != op || r.Conns != 2 || r.Clients != 3 {
					t.Errorf("%s: %d requests (%+v), want %d", op, r.Requests, r, total)
				}
				wantErrors := int64(0)
				if op == "multi" && s.Name == "zetcd" && testenv.Pending(t, "Multi") {
					wantErrors = total // counted and named, not fatal
					if r.ErrorsByCode["Unimplemented"] != total {
						t.Errorf("multi on zetcd without multi: errors %v, want %d Unimplemented", r.ErrorsByCode, total)
					}
				}
				if r.Errors != wantErrors {
					t.Errorf("%s: %d errors %v, want %d", op, r.Errors, r.ErrorsByCode, wantErrors)
				}
				var inHistogram int64
				for _, b := range r.Histogram {
					inHistogram += b.Count
				}
				if inHistogram != r.Requests-r.Errors {
					t.Errorf("%s: histogram holds %d, want %d", op, inHistogram, r.Requests-r.Errors)
				}
				// What the server holds matches what zkboom says it did.
				c := testenv.Connect(t, addr)
				count := func(dir string) int {
					children, _, err := c.Children(r.Root + dir)
					if err != nil {
						t.Fatalf("%s: children of %s: %v", op, r.Root+dir, err)
					}
					return len(children)
				}
				switch op {
				case "create":
					if n := count("/n"); n != total {
						t.Errorf("create: %d nodes created, want %d", n, total)
					}
				case "multi":
					if n := count("/n"); int64(n) != total-wantErrors {
						t.Errorf("multi: %d nodes created, want %d", n, total-wantErrors)
					}
				case "delete":
					if n := count("/d"); n != 0 {
						t.Errorf("delete: %d nodes left, want 0", n)
					}
				case "set":
					var versions int32
					for _, k := range []string{"/k"} {
						children, _, _ := c.Children(r.Root + k)
						for _, ch := range children {
							_, st, err := c.Get(r.Root + k + "/" + ch)
							if err != nil {
								t.Fatal(err)
							}
							versions += st.Version
						}
					}
					if versions != total {
						t.Errorf("set: data versions add up to %d, want %d", versions, total)
					}
				}
			}
			// Ephemeral sequential creates vanish with their sessions.
			r := boom(t, "--endpoints", addr, "--total", "10", "--ephemeral", "--sequential", "create")
			if n, _, err := testenv.Connect(t, addr).Children(r.Root + "/n"); err != nil || len(n) != 0 {
				t.Errorf("ephemerals after the run: %v, %v", n, err)
			}
		})
	}
}

func TestEtcd(t *testing.T) {
	e := testenv.StartEtcd(t)
	cli := e.Client(t)
	for _, op := range []string{"create", "set", "get", "exists", "children", "delete", "mixed", "watch"} {
		r := boom(t, "--etcd", "--endpoints", e.Etcd.Endpoint, "--conns", "2", "--clients", "3", "--total", "60", "--keys", "20", op)
		if r.Requests != total || r.Errors != 0 || r.Target != "etcd (raw)" {
			t.Errorf("%s: %d requests, %d errors %v; want %d, 0", op, r.Requests, r.Errors, r.ErrorsByCode, total)
		}
		count := func(sub string) int64 {
			resp, err := cli.Get(context.Background(), r.Root+sub, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			return resp.Count
		}
		switch op {
		case "create":
			if n := count("n/"); n != total {
				t.Errorf("create: %d keys, want %d", n, total)
			}
		case "delete":
			if n := count("d/"); n != 0 {
				t.Errorf("delete: %d keys left", n)
			}
		}
	}
}

func TestDurationAndText(t *testing.T) {
	addr := testenv.StartZetcd(t)
	var out, errb bytes.Buffer
	if code := run([]string{"--endpoints", addr, "--duration", "300ms", "--clients", "4", "get"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"get on ZooKeeper protocol", "Requests:\t", "Requests/sec:", "Response time histogram", "99.9% in "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Requests:\t0 ") {
		t.Errorf("no request in 300ms:\n%s", out.String())
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frob"},
		{"--total", "5", "--duration", "1s", "get"},
		{"delete"},
		{"--mix", "get=1,delete=1", "mixed"},
		{"--etcd", "multi"},
		{"--conns", "0", "get"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), "zkboom: ") {
			t.Errorf("zkboom %v: exit %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
	// No server: a readable error, exit 1.
	var out, errb bytes.Buffer
	if code := run([]string{"--etcd", "--endpoints", "http://127.0.0.1:1", "--total", "1", "get"}, &out, &errb); code != 1 {
		t.Errorf("no etcd: exit %d, stderr %q", code, errb.String())
	}
}

func TestParseMix(t *testing.T) {
	mix, err := parseMix("get=2,set=0,create=1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for r := range 3 {
		got = append(got, pickMix(mix, r))
	}
	if strings.Join(got, ",") != "get,get,create" {
		t.Errorf("picks %v", got)
	}
}

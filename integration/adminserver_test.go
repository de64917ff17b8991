package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/zetcd"
)

// The AdminServer is compared with a real ZooKeeper 3.9's (admin.enableServer=true, snapshot
// and restore turned off) after the same workload on both (fourLetterWorkload): every command
// by its name, with the same method and Authorization header, must answer the same HTTP
// status and a JSON object with the same members, recursively, each of the same JSON type.
// Where the workload fixes a value, it must be the same too.

// adminCall is one request of the comparison.
type adminCall struct {
	method, path, auth string
}

// adminCalls are every command of ZooKeeper 3.9's AdminServer (Commands) as an operator's tool
// asks it, and the refusals ZooKeeper answers with a status of its own.
var adminCalls = []adminCall{
	{"GET", "configuration", ""}, {"GET", "connections", ""}, {"GET", "dirs", ""}, {"GET", "dump", ""},
	{"GET", "environment", ""}, {"GET", "get_trace_mask", ""}, {"GET", "hash", ""},
	{"GET", "initial_configuration", ""}, {"GET", "is_read_only", ""}, {"GET", "last_snapshot", ""},
	{"GET", "leader", ""}, {"GET", "monitor", ""}, {"GET", "observers", ""}, {"GET", "ruok", ""},
	{"GET", "server_stats", ""}, {"GET", "stats", ""}, {"GET", "system_properties", ""},
	{"GET", "voting_view", ""}, {"GET", "watch_summary", ""}, {"GET", "watches", ""},
	{"GET", "watches_by_path", ""}, {"GET", "zabstate", ""},
	{"GET", "set_trace_mask", ""}, {"GET", "set_trace_mask?traceMask=306", ""},
	{"GET", "mntr", ""}, {"GET", "cons", ""}, {"GET", "srvr", ""}, {"GET", "nosuch", ""}, {"POST", "nosuch", ""},
	{"GET", "snapshot", ""}, {"GET", "snapshot", "basic x"}, {"GET", "snapshot", "digest u:p"},
	{"POST", "restore", ""}, {"POST", "restore", "basic x"}, {"POST", "restore", "digest u:p"},
	// Last: they reset what the commands above report.
	{"GET", "connection_stat_reset", ""}, {"GET", "observer_connection_stat_reset", ""}, {"GET", "stat_reset", ""},
}

// adminValuesCompared are the commands whose whole answer the workload fixes.
var adminValuesCompared = map[string]bool{
	"ruok": true, "is_read_only": true, "get_trace_mask": true, "set_trace_mask": true,
	"set_trace_mask?traceMask=306": true, "nosuch": true, "watch_summary": true,
	"hash": true, "leader": true, "observers": true, "voting_view": true, "zabstate": true,
	"snapshot": true, "restore": true,
}

// adminAnswer is one answer: its status and its decoded JSON object.
type adminAnswer struct {
	status int
	body   map[string]any
	raw    string
}

func askAdmin(t *testing.T, base string, c adminCall) adminAnswer {
	t.Helper()
	req, err := http.NewRequest(c.method, base+"/commands/"+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := adminAnswer{status: resp.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Errorf("%s %s: %d, not a JSON object: %v\n%s", c.method, c.path, resp.StatusCode, err, raw)
	}
	return a
}

// startZooKeeperAdmin starts a ZooKeeper with its AdminServer on a free port, and returns its
// client address and the AdminServer's base URL once it answers.
func startZooKeeperAdmin(t *testing.T) (addr, base string) {
	t.Helper()
	if jars, _ := filepath.Glob(filepath.Join(zkserver.LibDir(), "jetty-server-*.jar")); len(jars) == 0 {
		// ZooKeeper starts without its AdminServer when jetty is not on its class path;
		// tools/zookeeper/fetch.sh puts it there.
		msg := "no jetty in " + zkserver.LibDir() + " for ZooKeeper's AdminServer: run tools/zookeeper/fetch.sh"
		if zkserver.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	zk := zkserver.Start(t, zkserver.Options{
		ConfigLines: []string{"admin.enableServer=true", "admin.serverAddress=127.0.0.1", "admin.serverPort=" + strconv.Itoa(port)},
		SystemProps: map[string]string{"zookeeper.admin.snapshot.enabled": "false", "zookeeper.admin.restore.enabled": "false"},
	})
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/commands/ruok")
		if err == nil {
			resp.Body.Close()
			return zk.Addr, base
		}
		if time.Now().After(deadline) {
			t.Fatalf("ZooKeeper's AdminServer on %s does not answer: %v", base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startZetcdAdmin starts a zetcd with its AdminServer, and returns its client address and the
// AdminServer's base URL.
func startZetcdAdmin(t *testing.T) (addr, base string) {
	t.Helper()
	z := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{})
	_, port, _ := net.SplitHostPort(z.Addr)
	p, _ := strconv.Atoi(port)
	srv := httptest.NewServer(z.Server.AdminHandler(zetcd.AdminConfig{ClientPort: p, Authorizer: z.Backend}))
	t.Cleanup(srv.Close)
	return z.Addr, srv.URL
}

// jsonShape lists the members of v, recursively, with their JSON types: "path: type". An
// array's elements share the path "path[]"; the members of an object keyed by session ids or
// expiry times (which differ between servers) share "path.*".
func jsonShape(v any, path string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		out[path+": object"] = true
		keyedByID := strings.HasPrefix(path[strings.LastIndex(path, ".")+1:], "session_id_to_") ||
			strings.HasSuffix(path, "expiry_time_to_session_ids")
		for k, e := range x {
			if keyedByID {
				k = "*"
			}
			jsonShape(e, path+"."+k, out)
		}
	case []any:
		out[path+": array"] = true
		for _, e := range x {
			jsonShape(e, path+"[]", out)
		}
	case string:
		out[path+": string"] = true
	case float64:
		out[path+": number"] = true
	case bool:
		out[path+": boolean"] = true
	case nil:
		out[path+": null"] = true
	default:
		out[path+": "+fmt.Sprintf("%T", v)] = true
	}
}

// comparableShape is jsonShape less what differs by nature between a JVM and a Go process:
// the JVM's system properties (only their type is compared: all strings), and the
// per-namespace summaries ZooKeeper's monitor grows as namespaces are used.
func comparableShape(cmd string, body map[string]any) []string {
	all := map[string]bool{}
	jsonShape(body, "", all)
	var out []string
	for s := range all {
		switch {
		case (cmd == "system_properties") && !strings.HasPrefix(s, ".command:") && !strings.HasPrefix(s, ".error:") && s != ": object":
			_, typ, _ := strings.Cut(s, ": ")
			s = ".*: " + typ
		case strings.Contains(s, "_per_namespace"):
			continue
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func TestAdminServerMatchesZooKeeper(t *testing.T) {
	zkAddr, zkBase := startZooKeeperAdmin(t)
	zeAddr, zeBase := startZetcdAdmin(t)
	fourLetterWorkload(t, zkAddr, nil)
	fourLetterWorkload(t, zeAddr, nil)

	for _, c := range adminCalls {
		name := c.method + " " + c.path
		if c.auth != "" {
			name += " [" + c.auth + "]"
		}
		zk, ze := askAdmin(t, zkBase, c), askAdmin(t, zeBase, c)
		if zk.status != ze.status {
			t.Errorf("%s: status %d, ZooKeeper's %d\nzetcd: %s\nZooKeeper: %s", name, ze.status, zk.status, ze.raw, zk.raw)
			continue
		}
		zkShape, zeShape := comparableShape(c.path, zk.body), comparableShape(c.path, ze.body)
		if missing, extra := setDiff(zkShape, zeShape), setDiff(zeShape, zkShape); len(missing)+len(extra) > 0 {
			t.Errorf("%s: members differ from ZooKeeper's\nmissing: %v\nextra: %v", name, missing, extra)
		}
		if adminValuesCompared[c.path] && !reflect.DeepEqual(zk.body, ze.body) {
			t.Errorf("%s: %v; ZooKeeper answers %v", name, ze.body, zk.body)
		}
	}

	for _, cmd := range []string{"monitor", "server_stats"} {
		zk, ze := askAdmin(t, zkBase, adminCall{"GET", cmd, ""}), askAdmin(t, zeBase, adminCall{"GET", cmd, ""})
		for _, k := range []string{"znode_count", "ephemerals_count", "global_sessions", "watch_count", "approximate_data_size", "num_alive_connections", "node_count"} {
			if zk.body[k] != ze.body[k] {
				t.Errorf("%s %s: %v, ZooKeeper's %v", cmd, k, ze.body[k], zk.body[k])
			}
		}
	}

	for _, method := range []string{"HEAD", "OPTIONS", "PUT", "DELETE"} {
		for _, path := range []string{"/commands", "/commands/ruok", "/"} {
			statuses := map[string]int{}
			for name, base := range map[string]string{"zookeeper": zkBase, "zetcd": zeBase} {
				req, _ := http.NewRequest(method, base+path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				statuses[name] = resp.StatusCode
			}
			if statuses["zetcd"] != statuses["zookeeper"] {
				t.Errorf("%s %s: %d, ZooKeeper's %d", method, path, statuses["zetcd"], statuses["zookeeper"])
			}
		}
	}

	lists := map[string]string{}
	for name, base := range map[string]string{"zookeeper": zkBase, "zetcd": zeBase} {
		resp, err := http.Get(base + "/commands")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lists[name] = string(b)
	}
	if lists["zetcd"] != lists["zookeeper"] {
		t.Errorf("/commands:\n%s\nZooKeeper's:\n%s", lists["zetcd"], lists["zookeeper"])
	}
}

// setDiff is the members of a not in b.
func setDiff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

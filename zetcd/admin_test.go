package zetcd_test

import (
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/zetcd"
)

// adminServer starts a zetcd (testenv) with its AdminServer on an HTTP test server, and returns
// the zetcd's client address and the AdminServer's URL.
func adminServer(t *testing.T) (zkAddr, url string) {
	t.Helper()
	cfg := testenv.Config
	cfg.FourLetterWords = []string{"*"}
	z := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{Config: &cfg})
	_, port, _ := net.SplitHostPort(z.Addr)
	p, _ := strconv.Atoi(port)
	h := z.Server.AdminHandler(zetcd.AdminConfig{ClientPort: p, Authorizer: z.Backend})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return z.Addr, srv.URL
}

// adminGet runs a command and decodes its JSON answer.
func adminGet(t *testing.T, method, url, auth string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %v\n%s", method, url, resp.StatusCode, err, body)
	}
	return resp.StatusCode, out
}

// adminNames are ZooKeeper 3.9's AdminServer commands and their aliases (Commands).
var adminNames = map[string][]string{
	"configuration": {"conf", "config"}, "connection_stat_reset": {"crst"}, "connections": {"cons"},
	"dirs": nil, "dump": nil, "environment": {"env", "envi"}, "get_trace_mask": {"gtmk"}, "hash": nil,
	"initial_configuration": {"icfg"}, "is_read_only": {"isro"}, "last_snapshot": {"lsnp"},
	"leader": {"lead"}, "monitor": {"mntr"}, "observer_connection_stat_reset": {"orst"},
	"observers": {"obsr"}, "restore": {"rest"}, "ruok": nil, "set_trace_mask": {"stmk"},
	"server_stats": {"srvr"}, "snapshot": {"snap"}, "stat_reset": {"srst"}, "stats": {"stat"},
	"system_properties": {"sysp"}, "voting_view": nil, "watch_summary": {"wchs"},
	"watches": {"wchc"}, "watches_by_path": {"wchp"}, "zabstate": nil,
}

// TestAdminServerCommands: /commands links every command, each answers by its name and its
// aliases with "command" and "error", and the figures are the session's and the tree's.
func TestAdminServerCommands(t *testing.T) {
	addr, url := adminServer(t)
	c := testenv.Connect(t, addr)
	if _, err := c.Create("/a", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/a/e", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.GetW("/a"); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(url + "/commands")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for name := range adminNames {
		if !strings.Contains(string(list), `<a href="/commands/`+name+`">`+name+`</a>`) {
			t.Errorf("/commands does not link %s:\n%s", name, list)
		}
	}

	for name, aliases := range adminNames {
		if name == "snapshot" || name == "restore" {
			continue // TestAdminServerAuth
		}
		for _, n := range append([]string{name}, aliases...) {
			status, out := adminGet(t, http.MethodGet, url+"/commands/"+n, "")
			if status != http.StatusOK || out["command"] != name {
				t.Errorf("%s: %d, command %v; want 200, %s", n, status, out["command"], name)
			}
			if _, ok := out["error"]; !ok {
				t.Errorf("%s: no error member: %v", n, out)
			}
		}
	}

	sid := strconv.FormatInt(c.SessionID(), 10)
	_, mon := adminGet(t, http.MethodGet, url+"/commands/monitor", "")
	if mon["znode_count"] != 7.0 || mon["ephemerals_count"] != 1.0 || mon["server_state"] != "standalone" || mon["snap_count"] != 0.0 {
		t.Errorf("monitor: znode_count %v, ephemerals_count %v, server_state %v, snap_count %v; want 7, 1, standalone, 0",
			mon["znode_count"], mon["ephemerals_count"], mon["server_state"], mon["snap_count"])
	}
	_, dump := adminGet(t, http.MethodGet, url+"/commands/dump", "")
	if eph, _ := dump["session_id_to_ephemeral_paths"].(map[string]any); !slices.Equal(toStrings(eph[sid]), []string{"/a/e"}) {
		t.Errorf("dump: ephemerals %v; want %s: [/a/e]", dump["session_id_to_ephemeral_paths"], sid)
	}
	_, w := adminGet(t, http.MethodGet, url+"/commands/watches", "")
	if ws, _ := w["session_id_to_watched_paths"].(map[string]any); !slices.Equal(toStrings(ws[sid]), []string{"/a"}) {
		t.Errorf("watches: %v; want %s: [/a]", w["session_id_to_watched_paths"], sid)
	}
	_, cons := adminGet(t, http.MethodGet, url+"/commands/connections", "")
	conns, _ := cons["connections"].([]any)
	if len(conns) != 1 || conns[0].(map[string]any)["session_id"] != float64(c.SessionID()) {
		t.Errorf("connections: %v; want the one session %s", cons["connections"], sid)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

// TestAdminServerAnswers: the answers ZooKeeper 3.9.6 gives for an unknown command, a wrong
// method, the trace mask and a command that needs a parameter.
func TestAdminServerAnswers(t *testing.T) {
	addr, url := adminServer(t)
	for _, tc := range []struct {
		method, cmd string
		status      int
		want        map[string]any
	}{
		{"GET", "nosuch", 200, map[string]any{"command": "nosuch", "error": "Unknown command: nosuch"}},
		{"POST", "nosuch", 200, map[string]any{"command": "nosuch", "error": "Unknown command: nosuch"}},
		{"GET", "ruok", 200, map[string]any{"command": "ruok", "error": nil}},
		{"GET", "set_trace_mask", 200, map[string]any{"command": "set_trace_mask", "error": "setTraceMask requires long traceMask argument"}},
		{"GET", "set_trace_mask?traceMask=1023", 200, map[string]any{"command": "set_trace_mask", "error": nil, "tracemask": 1023.0}},
		{"GET", "gtmk", 200, map[string]any{"command": "get_trace_mask", "error": nil, "tracemask": 1023.0}},
		{"GET", "isro", 200, map[string]any{"command": "is_read_only", "error": nil, "read_only": false}},
		{"GET", "leader", 200, map[string]any{"command": "leader", "error": "server is not initialized"}},
	} {
		status, out := adminGet(t, tc.method, url+"/commands/"+tc.cmd, "")
		if status != tc.status || !maps.Equal(out, tc.want) {
			t.Errorf("%s %s: %d %v; want %d %v", tc.method, tc.cmd, status, out, tc.status, tc.want)
		}
	}
	if out, err := zkserver.FourLetterWord(addr, "gtmk", 5*time.Second); err != nil || out != "1023" {
		t.Errorf("gtmk after set_trace_mask 1023: %q, %v", out, err)
	}
	if status, out := adminGet(t, http.MethodPost, url+"/commands/ruok", ""); status != http.StatusInternalServerError || out["command"] != "ruok" {
		t.Errorf("POST ruok: %d %v; want 500 (ruok is served on GET)", status, out)
	}
	// ZooKeeper's servlet answers HEAD as GET and OPTIONS with 200, and refuses the others.
	for method, want := range map[string]int{"HEAD": 200, "OPTIONS": 200, "PUT": 405, "DELETE": 405} {
		req, _ := http.NewRequest(method, url+"/commands/ruok", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s ruok: %d, want %d", method, resp.StatusCode, want)
		}
	}
}

// TestAdminServerAuth: snapshot and restore need an identity holding every permission on "/"
// (401 without one or with a scheme zetcd has no provider for, 403 with one that lacks it),
// and are then answered as by a ZooKeeper that has them turned off (503).
func TestAdminServerAuth(t *testing.T) {
	addr, url := adminServer(t)
	check := func(method, cmd, auth string, status int, errMsg any) {
		t.Helper()
		got, out := adminGet(t, method, url+"/commands/"+cmd, auth)
		if got != status || out["error"] != errMsg {
			t.Errorf("%s %s [%s]: %d %v; want %d, error %v", method, cmd, auth, got, out, status, errMsg)
		}
	}
	for _, c := range []struct{ method, cmd string }{{"GET", "snapshot"}, {"POST", "restore"}} {
		check(c.method, c.cmd, "", 401, "Auth info is missing for the command")
		check(c.method, c.cmd, "basic x", 401, "Not authenticated")
		check(c.method, c.cmd, "digest u:p", 503, nil)
	}
	check("GET", "restore", "digest u:p", 500, "restore does not take GET")

	c := testenv.Connect(t, addr)
	if err := c.AddAuth("digest", []byte("admin:secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetACL("/", zk.DigestACL(zk.PermAll, "admin", "secret"), -1); err != nil {
		t.Fatal(err)
	}
	check("GET", "snapshot", "digest u:p", 403, "Not authorized")
	check("GET", "snapshot", "digest admin:wrong", 403, "Not authorized")
	check("GET", "snapshot", "digest admin:secret", 503, nil)
	check("POST", "restore", "digest admin:secret", 503, nil)
}

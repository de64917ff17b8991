package integration

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/testenv"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/zetcd"
)

// Four-letter words are compared with a real ZooKeeper 3.9 after the same workload on both:
// labels, keys, line order and shapes must be ZooKeeper's; values are zetcd's, except where the
// workload fixes them (node, ephemeral, session and watch counts, data size), which must match.

// fourLetterWorkload makes the same state on any server: /a ("hello") with an ephemeral child
// /a/e of session 1; session 1 watches /a (data and children) and /nope (exists); session 2
// watches /a (data). It returns the outputs of every command, run afterwards in this order.
func fourLetterWorkload(t *testing.T, addr string, cmds []string) map[string]string {
	t.Helper()
	c1 := connect(t, addr)
	c2 := connect(t, addr)
	if _, err := c1.Create("/a", []byte("hello"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Create("/a/e", []byte("x"), zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c1.GetW("/a"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c1.ChildrenW("/a"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c1.ExistsW("/nope"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c2.GetW("/a"); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cmd := range cmds {
		s, err := itest.FourLetter(addr, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		out[cmd] = s
	}
	return out
}

// allFourLetterConfig answers every word, as the test ZooKeeper does (4lw.commands.whitelist=*).
func allFourLetterConfig() *zetcd.Config {
	cfg := testenv.Config
	cfg.FourLetterWords = []string{"*"}
	return &cfg
}

func TestFourLetterWordsMatchZooKeeper(t *testing.T) {
	cmds := []string{"ruok", "isro", "gtmk", "srvr", "stat", "mntr", "conf", "envi", "cons",
		"wchs", "wchc", "wchp", "dump", "dirs", "crst", "srst"}
	zkOut := fourLetterWorkload(t, testenv.StartZooKeeper(t), cmds)
	z := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{Config: allFourLetterConfig()})
	zeOut := fourLetterWorkload(t, z.Addr, cmds)
	for _, cmd := range cmds {
		t.Logf("%s:\n--- zookeeper\n%s\n--- zetcd\n%s", cmd, zkOut[cmd], zeOut[cmd])
	}

	t.Run("fixed", func(t *testing.T) {
		for _, cmd := range []string{"ruok", "isro", "gtmk", "crst", "srst", "wchs"} {
			if zeOut[cmd] != zkOut[cmd] {
				t.Errorf("%s: zetcd %q, ZooKeeper %q", cmd, zeOut[cmd], zkOut[cmd])
			}
		}
	})

	t.Run("srvr", func(t *testing.T) {
		compareLabels(t, "srvr", labels(zkOut["srvr"], ": "), labels(zeOut["srvr"], ": "))
		versionLine(t, zeOut["srvr"], "Zookeeper version: ")
		if zk, ze := labelValue(zkOut["srvr"], "Node count: "), labelValue(zeOut["srvr"], "Node count: "); zk != ze {
			t.Errorf("Node count: zetcd %s, ZooKeeper %s", ze, zk)
		}
	})

	t.Run("stat", func(t *testing.T) {
		zkHead, zkClients, zkTail := splitStat(t, zkOut["stat"])
		zeHead, zeClients, zeTail := splitStat(t, zeOut["stat"])
		compareLabels(t, "stat", labels(zkHead+zkTail, ": "), labels(zeHead+zeTail, ": "))
		brief := regexp.MustCompile(`^ /\S+\[[01]\]\(queued=\d+,recved=\d+,sent=\d+\)$`)
		for _, l := range append(zkClients, zeClients...) {
			if !brief.MatchString(l) {
				t.Errorf("stat client line %q has not the shape %s", l, brief)
			}
		}
		if len(zeClients) < 3 {
			t.Errorf("stat lists %d clients, want the 2 sessions and itself:\n%s", len(zeClients), zeOut["stat"])
		}
	})

	t.Run("mntr", func(t *testing.T) {
		zkKV, zkKeys := mntr(t, zkOut["mntr"])
		zeKV, zeKeys := mntr(t, zeOut["mntr"])
		classic := []string{"zk_version", "zk_avg_latency", "zk_max_latency", "zk_min_latency",
			"zk_packets_received", "zk_packets_sent", "zk_num_alive_connections", "zk_outstanding_requests",
			"zk_server_state", "zk_znode_count", "zk_watch_count", "zk_ephemerals_count",
			"zk_approximate_data_size", "zk_open_file_descriptor_count", "zk_max_file_descriptor_count"}
		for _, k := range classic {
			if _, ok := zkKV[k]; !ok {
				t.Errorf("ZooKeeper's mntr lacks classic key %s", k)
			}
			if _, ok := zeKV[k]; !ok {
				t.Errorf("zetcd's mntr lacks classic key %s", k)
			}
		}
		for _, k := range zeKeys {
			if _, ok := zkKV[k]; !ok {
				t.Errorf("zetcd's mntr has key %s, which ZooKeeper's has not", k)
			}
		}
		// ZooKeeper prints its gauges first, in a fixed order; zetcd prints every one of them,
		// in the same order.
		gauges := zkKeys[:slices.Index(zkKeys, "zk_non_mtls_local_conn_count")+1]
		if !slices.Equal(zeKeys[:len(gauges)], gauges) {
			t.Errorf("mntr gauges: zetcd %q, ZooKeeper %q", zeKeys[:len(gauges)], gauges)
		}
		for _, k := range []string{"zk_server_state", "zk_znode_count", "zk_ephemerals_count",
			"zk_approximate_data_size", "zk_watch_count", "zk_global_sessions", "zk_local_sessions"} {
			if zeKV[k] != zkKV[k] {
				t.Errorf("%s: zetcd %s, ZooKeeper %s", k, zeKV[k], zkKV[k])
			}
		}
		if !strings.HasPrefix(zeKV["zk_version"], "3.9.") {
			t.Errorf("zk_version %q is not ZooKeeper-3.9-compatible", zeKV["zk_version"])
		}
	})

	t.Run("conf", func(t *testing.T) {
		compareLabels(t, "conf", labels(zkOut["conf"], "="), labels(zeOut["conf"], "="))
		port := z.Addr[strings.LastIndexByte(z.Addr, ':')+1:]
		if got := labelValue(zeOut["conf"], "clientPort="); got != port {
			t.Errorf("clientPort=%s, want %s", got, port)
		}
	})

	t.Run("envi", func(t *testing.T) {
		for _, out := range []string{zkOut["envi"], zeOut["envi"]} {
			if !strings.HasPrefix(out, "Environment:\n") {
				t.Errorf("envi does not start with Environment: %q", out)
			}
		}
		compareLabels(t, "envi", labels(zkOut["envi"], "="), labels(zeOut["envi"], "="))
		// kazoo's server_version: the digits before the first non-digit-or-dot of
		// zookeeper.version.
		v := labelValue(zeOut["envi"], "zookeeper.version=")
		if !regexp.MustCompile(`^3\.9\.\d+-`).MatchString(v) {
			t.Errorf("zookeeper.version=%s does not parse as 3.9.x", v)
		}
	})

	t.Run("cons", func(t *testing.T) {
		full := regexp.MustCompile(`^ /\S+\[1\]\(queued=\d+,recved=\d+,sent=\d+,sid=0x[0-9a-f]+,lop=[A-Z]+,est=\d+,to=\d+(,lcxid=0x[0-9a-f]+)?,lzxid=0x[0-9a-f]+,lresp=\d+,llat=\d+,minlat=\d+,avglat=\d+,maxlat=\d+\)$`)
		brief := regexp.MustCompile(`^ /\S+\[0\]\(queued=\d+,recved=\d+,sent=\d+\)$`)
		lops := func(out string) []string {
			if !strings.HasSuffix(out, ")\n\n") {
				t.Errorf("cons does not end with a blank line: %q", out)
			}
			var ops []string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n\n"), "\n") {
				switch {
				case full.MatchString(l):
					ops = append(ops, regexp.MustCompile(`lop=([A-Z]+)`).FindStringSubmatch(l)[1])
				case !brief.MatchString(l):
					t.Errorf("cons line %q has neither shape", l)
				}
			}
			sort.Strings(ops)
			return ops
		}
		if zk, ze := lops(zkOut["cons"]), lops(zeOut["cons"]); !slices.Equal(zk, ze) {
			t.Errorf("cons last operations: zetcd %q, ZooKeeper %q", ze, zk)
		}
	})

	t.Run("wchc", func(t *testing.T) {
		if zk, ze := watchLists(t, zkOut["wchc"], "0x"), watchLists(t, zeOut["wchc"], "0x"); !slices.Equal(zk, ze) {
			t.Errorf("wchc: zetcd %q, ZooKeeper %q", ze, zk)
		}
	})

	t.Run("wchp", func(t *testing.T) {
		if zk, ze := watchLists(t, zkOut["wchp"], "/"), watchLists(t, zeOut["wchp"], "/"); !slices.Equal(zk, ze) {
			t.Errorf("wchp: zetcd %q, ZooKeeper %q", ze, zk)
		}
	})

	t.Run("dump", func(t *testing.T) {
		shape := func(out string) []string {
			var s []string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				l = regexp.MustCompile(`^\d+ expire at [A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \S+ \d{4}:$`).ReplaceAllString(l, "<expiry set>")
				l = regexp.MustCompile(`0x[0-9a-f]+`).ReplaceAllString(l, "<sid>")
				l = regexp.MustCompile(`^\tip: /\S+ `).ReplaceAllString(l, "\tip: <addr> ")
				l = regexp.MustCompile(`^(Session|Connections) Sets \(\d+\)`).ReplaceAllString(l, "$1 Sets (n)")
				// Four-letter-word connections of the commands before may not have gone yet.
				l = regexp.MustCompile(`^Connections Sets \(n\)/\(\d+\)`).ReplaceAllString(l, "Connections Sets (n)/(m)")
				s = append(s, l)
			}
			return s
		}
		zk, ze := shape(zkOut["dump"]), shape(zeOut["dump"])
		// Sessions, connections and expiry sets vary in number; the sections, the
		// ephemerals and every line's shape must be ZooKeeper's.
		sections := func(lines []string) []string {
			var s []string
			for _, l := range lines {
				if !strings.HasPrefix(l, "\t") && l != "<expiry set>" {
					s = append(s, l)
				}
			}
			return s
		}
		if !slices.Equal(sections(zk), sections(ze)) {
			t.Errorf("dump sections:\nzetcd     %q\nZooKeeper %q", sections(ze), sections(zk))
		}
		for _, l := range ze {
			if strings.HasPrefix(l, "\t") && l != "\t<sid>" && l != "\t/a/e" && !strings.HasPrefix(l, "\tip: <addr> sessionId: <sid>") {
				t.Errorf("dump line %q has no ZooKeeper shape", l)
			}
		}
	})

	t.Run("dirs", func(t *testing.T) {
		re := regexp.MustCompile(`^datadir_size: \d+\nlogdir_size: \d+\n$`)
		for _, out := range []string{zkOut["dirs"], zeOut["dirs"]} {
			if !re.MatchString(out) {
				t.Errorf("dirs %q has not the shape %s", out, re)
			}
		}
	})
}

// TestFourLetterWordsWhitelist: a word outside the whitelist gets ZooKeeper's refusal, and srvr
// is answered whatever the list says, on both servers.
func TestFourLetterWordsWhitelist(t *testing.T) {
	// zkserver needs conf to see that the server it started answers.
	zkAddr := zkserver.Start(t, zkserver.Options{ConfigLines: []string{"4lw.commands.whitelist=ruok,conf"}}).Addr
	cfg := testenv.Config
	cfg.FourLetterWords = []string{"ruok", "conf"}
	zeAddr := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{Config: &cfg}).Addr
	for _, cmd := range []string{"wchc", "mntr", "stat", "ruok"} {
		zk, err := itest.FourLetter(zkAddr, cmd)
		if err != nil {
			t.Fatal(err)
		}
		ze, err := itest.FourLetter(zeAddr, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if ze != zk {
			t.Errorf("%s: zetcd %q, ZooKeeper %q", cmd, ze, zk)
		}
	}
	for _, addr := range []string{zkAddr, zeAddr} {
		if out, _ := itest.FourLetter(addr, "srvr"); !strings.HasPrefix(out, "Zookeeper version: ") {
			t.Errorf("srvr on %s with whitelist ruok,conf: %q", addr, out)
		}
	}
	// zetcd's default whitelist.
	def := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{}).Addr
	for _, cmd := range []string{"ruok", "srvr", "stat", "mntr", "conf", "envi", "isro", "cons", "wchs", "dirs"} {
		if out, _ := itest.FourLetter(def, cmd); strings.Contains(out, "not in the whitelist") {
			t.Errorf("%s refused by default", cmd)
		}
	}
	for _, cmd := range []string{"wchc", "wchp", "dump", "crst", "srst", "gtmk"} {
		if out, _ := itest.FourLetter(def, cmd); out != cmd+" is not executed because it is not in the whitelist.\n" {
			t.Errorf("%s answered by default: %q", cmd, out)
		}
	}
}

// labels returns the label of each line (the text before sep), skipping lines without it.
func labels(out, sep string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, sep); i > 0 {
			ls = append(ls, l[:i])
		}
	}
	return ls
}

func compareLabels(t *testing.T, cmd string, zk, ze []string) {
	t.Helper()
	if len(zk) == 0 || !slices.Equal(zk, ze) {
		t.Errorf("%s labels:\nzetcd     %q\nZooKeeper %q", cmd, ze, zk)
	}
}

// labelValue returns the rest of the first line that starts with label.
func labelValue(out, label string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, label); ok {
			return v
		}
	}
	return ""
}

// versionLine checks zetcd's version line has ZooKeeper's shape and a 3.9 version.
func versionLine(t *testing.T, out, label string) {
	t.Helper()
	v := labelValue(out, label)
	if !regexp.MustCompile(`^3\.9\.\d+-\S+, built on \d{4}-\d\d-\d\d \d\d:\d\d UTC$`).MatchString(v) {
		t.Errorf("version %q has not ZooKeeper's shape", v)
	}
}

// splitStat splits stat's output into the version line, the client lines, and the srvr lines.
func splitStat(t *testing.T, out string) (head string, clients []string, tail string) {
	t.Helper()
	before, rest, ok := strings.Cut(out, "Clients:\n")
	if !ok {
		t.Fatalf("stat without Clients: %q", out)
	}
	list, after, ok := strings.Cut(rest, "\n\n")
	if !ok {
		t.Fatalf("stat without a blank line after the clients: %q", out)
	}
	return before, strings.Split(list, "\n"), after
}

// mntr parses mntr's key<TAB>value lines.
func mntr(t *testing.T, out string) (map[string]string, []string) {
	t.Helper()
	kv := map[string]string{}
	var keys []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		k, v, ok := strings.Cut(l, "\t")
		if !ok || !strings.HasPrefix(k, "zk_") {
			t.Errorf("mntr line %q is not zk_<key><TAB><value>", l)
			continue
		}
		kv[k] = v
		keys = append(keys, k)
	}
	return kv, keys
}

// watchLists parses wchc or wchp: blocks of a heading line (starting with head) followed by
// tab-indented lines, then a blank line. Session ids are replaced by "sid"; each block becomes
// "heading: items" with items sorted, and the blocks are sorted.
func watchLists(t *testing.T, out, head string) []string {
	t.Helper()
	if !strings.HasSuffix(out, "\n\n") && out != "\n" {
		t.Errorf("%q does not end with a blank line", out)
	}
	sid := regexp.MustCompile(`^0x[0-9a-f]+$`)
	norm := func(s string) string {
		if sid.MatchString(s) {
			return "sid"
		}
		return s
	}
	var blocks []string
	var heading string
	var items []string
	flush := func() {
		if heading != "" {
			sort.Strings(items)
			blocks = append(blocks, fmt.Sprintf("%s: %s", heading, strings.Join(items, " ")))
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "\t"):
			items = append(items, norm(l[1:]))
		case strings.HasPrefix(l, head):
			flush()
			heading, items = norm(l), nil
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	flush()
	sort.Strings(blocks)
	return blocks
}

// TestFourLetterWordsCounts: each four-letter word's answer counts as a packet sent, a
// connection that has answered its word is no longer counted, and srst resets mntr's byte and
// connection counters, on both servers: after srst and three ruok, srvr shows four packets sent
// and one connection (its own), and mntr's counters are ZooKeeper's.
func TestFourLetterWordsCounts(t *testing.T) {
	zkAddr := testenv.StartZooKeeper(t)
	zeAddr := testenv.StartZetcdOn(t, testenv.StartEtcd(t), testenv.Options{Config: allFourLetterConfig()}).Addr
	counters := map[string]map[string]string{}
	for name, addr := range map[string]string{"zookeeper": zkAddr, "zetcd": zeAddr} {
		connect(t, addr) // a session's bytes and connection request, before the reset
		for _, cmd := range []string{"srst", "ruok", "ruok", "ruok"} {
			if _, err := itest.FourLetter(addr, cmd); err != nil {
				t.Fatalf("%s %s: %v", name, cmd, err)
			}
		}
		out, err := itest.FourLetter(addr, "srvr")
		if err != nil {
			t.Fatal(err)
		}
		if sent, conns := labelValue(out, "Sent: "), labelValue(out, "Connections: "); sent != "4" || conns != "2" {
			t.Errorf("%s: srvr after srst and three ruok: Sent %s, Connections %s, want 4 and 2 (the session's and its own):\n%s", name, sent, conns, out)
		}
		out, err = itest.FourLetter(addr, "mntr")
		if err != nil {
			t.Fatal(err)
		}
		counters[name], _ = mntr(t, out)
	}
	for _, k := range []string{"zk_packets_sent", "zk_packets_received", "zk_bytes_received_count", "zk_response_bytes", "zk_connection_request_count", "zk_connection_rejected"} {
		if ze, zk := counters["zetcd"][k], counters["zookeeper"][k]; ze != zk {
			t.Errorf("%s after srst: zetcd %s, ZooKeeper %s", k, ze, zk)
		}
	}
}

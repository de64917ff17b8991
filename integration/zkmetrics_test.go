package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zetcd/zetcd/internal/testkit/itest"
	"github.com/zetcd/zetcd/internal/testkit/zkserver"
	"github.com/zetcd/zetcd/zetcd"
)

// scrapeFamilies reads url's Prometheus text into metric families by name.
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp := itest.GetOK(t, url)
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// familyOf returns the family a query's series name belongs to: the name itself, or a
// summary's or histogram's for its _sum, _count or _bucket series.
func familyOf(fams map[string]*dto.MetricFamily, name string) (*dto.MetricFamily, bool) {
	if f, ok := fams[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_sum", "_count", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && f.GetType() != dto.MetricType_GAUGE && f.GetType() != dto.MetricType_COUNTER {
				return f, true
			}
		}
	}
	return nil, false
}

// readNames reads a testdata list: one name a line, # comments.
func readNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// startZetcdWithMetrics runs the zetcd binary (embedded etcd) with --metrics-addr and makes some
// requests of every kind the ZooKeeper metrics count: creates, reads, a setData, a watch, a
// missing node. It returns the /metrics URL.
func startZetcdWithMetrics(t *testing.T) string {
	addr, maddr := itest.FreePort(t), itest.FreePort(t)
	itest.StartProcessArgs(t, addr, "--data-dir", t.TempDir(), "--metrics-addr", maddr)
	zkRequests(t, addr)
	return "http://" + maddr + "/metrics"
}

// zkRequests makes the same few requests on any server.
func zkRequests(t *testing.T, addr string) {
	c := connect(t, addr)
	for i := range 3 {
		if _, err := c.Create("/zkm"+strconv.Itoa(i), []byte("data"), 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Set("/zkm0", []byte("more data"), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := c.GetW("/zkm1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Children("/"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Exists("/none"); err != nil || ok {
		t.Fatalf("exists /none: %v %v", ok, err)
	}
}

// checkZKMetric reports how zetcd's family f differs from what ZooKeeper's
// PrometheusMetricsProvider exports for m: its type, its label names, a summary's quantiles.
func checkZKMetric(m zetcd.ZKMetric, f *dto.MetricFamily) error {
	if got := strings.ToLower(f.GetType().String()); got != m.Type {
		return fmt.Errorf("type %s, want %s", got, m.Type)
	}
	for _, s := range f.GetMetric() {
		if len(s.GetLabel()) != 0 {
			return fmt.Errorf("labels %v, want none", s.GetLabel())
		}
		if m.Type != "summary" {
			continue
		}
		var qs []float64
		for _, q := range s.GetSummary().GetQuantile() {
			qs = append(qs, q.GetQuantile())
		}
		if !slices.Equal(qs, m.Quantiles) {
			return fmt.Errorf("quantiles %v, want %v", qs, m.Quantiles)
		}
	}
	return nil
}

// TestZooKeeperMetricNames: every metric name the queries of ZooKeeper's example alert rules and
// of Grafana's ZooKeeper mixin use (testdata/zookeeper_*_metrics.txt) resolves against zetcd's /metrics, or is one zetcd
// leaves out for a reason it states (zetcd.ZKMetricsLeftOut), listed here; and every ZooKeeper
// name zetcd claims to export is there with ZooKeeper's type, labels and quantiles.
func TestZooKeeperMetricNames(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	url := startZetcdWithMetrics(t)
	fams := scrapeFamilies(t, url)
	for _, m := range zetcd.ZKMetrics() {
		f, ok := fams[m.Name]
		if !ok {
			t.Errorf("%s: not on /metrics", m.Name)
			continue
		}
		if err := checkZKMetric(m, f); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
	var leftOut []string
	queried := append(readNames(t, "testdata/zookeeper_rules_metrics.txt"), readNames(t, "testdata/zookeeper_mixin_metrics.txt")...)
	for _, name := range queried {
		if name == "up" {
			continue // Prometheus records it for every scrape; no server exports it
		}
		if _, ok := familyOf(fams, name); ok {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")
		if why, ok := zetcd.ZKMetricsLeftOut[base]; ok {
			leftOut = append(leftOut, name+": "+why)
			continue
		}
		t.Errorf("%s: queried by ZooKeeper's alert rules or Grafana's ZooKeeper mixin, not on zetcd's /metrics and not a name zetcd leaves out", name)
	}
	sort.Strings(leftOut)
	t.Logf("names ZooKeeper's alert rules and Grafana's ZooKeeper mixin query that zetcd leaves out:\n\t%s", strings.Join(leftOut, "\n\t"))

	// The figures moved with the requests.
	for name, atLeast := range map[string]float64{
		"znode_count": 4 + 3 + 1, "num_alive_connections": 1, "watch_count": 1, "packets_received": 8,
		"approximate_data_size": 1, "uptime": 1, "open_file_descriptor_count": 1,
	} {
		if v := fams[name].GetMetric()[0].GetGauge().GetValue(); v < atLeast {
			t.Errorf("%s = %v, want at least %v", name, v, atLeast)
		}
	}
	if n := fams["updatelatency"].GetMetric()[0].GetSummary().GetSampleCount(); n != 4 {
		t.Errorf("updatelatency_count = %d, want 4 (three creates and a setData)", n)
	}
	if n := fams["readlatency"].GetMetric()[0].GetSummary().GetSampleCount(); n != 3 {
		t.Errorf("readlatency_count = %d, want 3 (getData, getChildren, exists)", n)
	}
	if n := fams["fsynctime"].GetMetric()[0].GetSummary().GetSampleCount(); n == 0 {
		t.Errorf("fsynctime_count = 0 after writes to the embedded etcd")
	}
}

// compileRegistrationsProvider compiles tools/zookeeper/metrics/RegistrationsProvider.java
// against ZooKeeper's jars into a temporary directory, for a real ZooKeeper to load. It runs
// javac from the java runtime's jdk.compiler module, which a JRE has too (the launcher of Java
// programs from source uses it). Without java or the jars the test is skipped, or failed when
// zkserver.Required.
func compileRegistrationsProvider(t *testing.T) string {
	t.Helper()
	lib := zkserver.LibDir()
	jars, _ := filepath.Glob(filepath.Join(lib, "zookeeper-[0-9]*.jar"))
	java, err := exec.LookPath("java")
	if err != nil || len(jars) == 0 {
		msg := fmt.Sprintf("java (%v) and ZooKeeper's jars in %q needed", err, lib)
		if zkserver.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := t.TempDir()
	all, _ := filepath.Glob(filepath.Join(lib, "*.jar")) // javac's Main expands no wildcard
	cmd := exec.Command(java, "-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn",
		"-cp", strings.Join(all, string(filepath.ListSeparator)), "-d", out,
		filepath.Join("..", "tools", "zookeeper", "metrics", "RegistrationsProvider.java"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, b)
	}
	return out
}

// zkKinds starts a real ZooKeeper with RegistrationsProvider as its metrics provider, makes
// zkRequests on it, and returns the kind of every metric it registered, by name.
func zkKinds(t *testing.T) map[string]string {
	t.Helper()
	classes := compileRegistrationsProvider(t)
	zk := zkserver.Start(t, zkserver.Options{
		ConfigLines: []string{"metricsProvider.className=zetcd.oracle.RegistrationsProvider"},
		Classpath:   []string{classes},
	})
	zkRequests(t, zk.Addr)
	mntr, err := zkserver.FourLetterWord(zk.Addr, "mntr", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, line := range strings.Split(mntr, "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			if name, ok := strings.CutPrefix(k, "zk_metric_kind."); ok {
				kinds[name] = v
			}
		}
	}
	if len(kinds) == 0 {
		t.Fatalf("mntr reports no registration; the provider was not loaded:\n%s", mntr)
	}
	return kinds
}

// promExport is what PrometheusMetricsProvider exports for a metric of a kind
// RegistrationsProvider reports: the type, and a summary's quantiles; the sets have the label
// "key", which none of zetcd's has.
func promExport(kind string) (typ string, quantiles []float64) {
	switch kind {
	case "gauge", "gauge_set":
		return "gauge", nil
	case "counter", "counter_set":
		return "counter", nil
	case "summary_basic", "summary_set_basic":
		return "summary", []float64{0.5}
	case "summary_advanced", "summary_set_advanced":
		return "summary", []float64{0.5, 0.9, 0.99}
	}
	return kind, nil
}

// TestZooKeeperMetricsMatchZooKeeper compares zetcd's ZooKeeper names with the metrics a real
// ZooKeeper 3.9 registers, after the same requests on both: each name zetcd exports is one
// ZooKeeper registers, without a label set, and zetcd's family has the type and quantiles
// PrometheusMetricsProvider gives that kind of metric. ZooKeeper's registrations are read
// through RegistrationsProvider (its Prometheus provider is not among the jars tools/zookeeper
// fetches); the names ZooKeeper registers that zetcd leaves out are listed.
func TestZooKeeperMetricsMatchZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the zetcd binary")
	}
	kinds := zkKinds(t)
	fams := scrapeFamilies(t, startZetcdWithMetrics(t))

	exported := map[string]bool{}
	for _, m := range zetcd.ZKMetrics() {
		exported[m.Name] = true
		kind, ok := kinds[m.Name]
		if !ok {
			t.Errorf("%s: zetcd exports it; ZooKeeper 3.9 registers no metric by that name", m.Name)
			continue
		}
		if strings.HasSuffix(kind, "_set") || strings.Contains(kind, "_set_") {
			t.Errorf("%s: ZooKeeper registers a %s (label key); zetcd exports it without labels", m.Name, kind)
		}
		typ, quantiles := promExport(kind)
		if m.Type != typ || !slices.Equal(m.Quantiles, quantiles) {
			t.Errorf("%s: ZooKeeper registers a %s, exported as a %s %v; zetcd's is a %s %v", m.Name, kind, typ, quantiles, m.Type, m.Quantiles)
		}
		f, ok := fams[m.Name]
		if !ok {
			t.Errorf("%s: not on zetcd's /metrics", m.Name)
			continue
		}
		if err := checkZKMetric(m, f); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
	var leftOut []string
	for name, kind := range kinds {
		if !exported[name] {
			leftOut = append(leftOut, name+" ("+kind+")")
		}
	}
	sort.Strings(leftOut)
	t.Logf("ZooKeeper 3.9 registers %d metrics; zetcd exports %d of them and leaves out:\n\t%s",
		len(kinds), len(exported), strings.Join(leftOut, "\n\t"))
}

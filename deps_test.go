// Package layout_test keeps the arrows between zetcd's packages pointing one way (docs/design.md,
// "Layers"): the wire codec knows only the standard library, ZooKeeper's rules and the watch
// registry know no storage, the front knows neither the store nor the cross-checker, and the
// etcd store is the only library package that talks to etcd.
package layout_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/zetcd/zetcd/"

// layer is one package's allowed imports among the module's own packages (the package itself
// aside); etcd says whether it may depend on any go.etcd.io package, std whether it may depend
// on nothing but the standard library and module packages.
type layer struct {
	pkg    string
	module []string
	etcd   bool
	std    bool
}

var layers = []layer{
	{pkg: "encoding", std: true},
	{pkg: "internal/sasl", std: true},
	{pkg: "internal/boltfile", std: true},
	{pkg: "internal/testkit/tcpproxy", std: true},
	{pkg: "internal/gomaxprocs"},
	{pkg: "internal/znode", module: []string{"encoding"}},
	{pkg: "internal/watch", module: []string{"encoding", "internal/znode"}},
	{pkg: "internal/zkdata", module: []string{"encoding"}},
	{pkg: "internal/zklive", module: []string{"encoding", "internal/zkdata"}},
	{pkg: "zetcd", module: []string{"encoding"}},
	{pkg: "zetcd/zetcdtest", module: []string{"encoding", "zetcd"}},
	{pkg: "xchk", module: []string{"encoding", "zetcd"}},
	{pkg: "zkrelay", module: []string{"encoding"}},
	{pkg: "etcdstore", module: []string{"encoding", "internal/boltfile", "internal/znode", "internal/watch", "internal/zkdata", "zetcd"}, etcd: true},
	// migrate drives etcdstore's Mirror, and so depends on etcd through it.
	{pkg: "migrate", module: []string{"encoding", "etcdstore", "internal/boltfile", "internal/zklive", "internal/zkdata", "internal/znode", "internal/watch", "zetcd"}, etcd: true},
}

// etcdAllowed lists the module packages besides etcdstore that may import etcd: composition
// roots, clients, the embedded etcd, the client's member guard, test harnesses, and migrate,
// which reaches etcd through etcdstore's Mirror only.
var etcdAllowed = []string{"cmd/", "tools/", "internal/embedetcd", "internal/memberguard", "internal/testkit/", "integration", "etcdstore", "migrate"}

type dep struct {
	path     string
	standard bool
}

// deps lists what pkg depends on, directly or not, without its tests (go list -deps).
func deps(t *testing.T, pkg string) []dep {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	var ds []dep
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		ds = append(ds, dep{path: path, standard: std == "true"})
	}
	return ds
}

func TestLayerImports(t *testing.T) {
	for _, l := range layers {
		for _, d := range deps(t, module+l.pkg) {
			own, inModule := strings.CutPrefix(d.path, module)
			switch {
			case d.standard || own == l.pkg:
			case inModule && !slices.Contains(l.module, own):
				t.Errorf("%s depends on %s, which it must not (allowed: %v)", l.pkg, own, l.module)
			case l.std && !inModule:
				t.Errorf("%s depends on %s: it may use the standard library only", l.pkg, d.path)
			case !l.etcd && strings.HasPrefix(d.path, "go.etcd.io/"):
				t.Errorf("%s depends on %s: only etcdstore may know etcd", l.pkg, d.path)
			}
		}
	}
}

// TestOnlyStoreImportsEtcd: no library package other than etcdstore reaches etcd, also
// through another package.
func TestOnlyStoreImportsEtcd(t *testing.T) {
	out, err := exec.Command("go", "list", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		own := strings.TrimPrefix(pkg, module)
		if own == "github.com/zetcd/zetcd" || slices.ContainsFunc(etcdAllowed, func(p string) bool { return strings.HasPrefix(own, p) }) {
			continue
		}
		for _, d := range deps(t, pkg) {
			if strings.HasPrefix(d.path, "go.etcd.io/") {
				t.Errorf("%s depends on %s: only etcdstore may know etcd", own, d.path)
				break
			}
		}
	}
}

package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// diffRun runs `zkctl diff` with args.
func diffRun(t *testing.T, args ...string) result {
	t.Helper()
	return diffRunG(t, nil, args...)
}

// diffRunG runs `zkctl GLOBAL... diff ARGS...`.
func diffRunG(t *testing.T, global []string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	line := append([]string{"--timeout", "5s"}, global...)
	code := e.run(append(append(line, "diff"), args...))
	return result{out.String(), errb.String(), code}
}

// applyWrites applies one fixed sequence of writes: creates, setData, setACL, deletes, a multi
// and a sequential child. It returns the session that owns the ephemeral node /app/live.
func applyWrites(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c := testenv.Connect(t, addr)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	open := zk.WorldACL(zk.PermAll)
	must(c.Create("/app", []byte("v1"), 0, open))
	must(c.Create("/app/a", nil, 0, open))
	must(c.Create("/app/b", []byte{}, 0, open))
	must(c.Create("/app/a/x", []byte("x"), 0, open))
	must(c.Create("/app/gone", []byte("g"), 0, open))
	must(c.Set("/app", []byte("v2"), 0))
	must(c.Set("/app/a/x", []byte("xx"), -1))
	must(c.SetACL("/app/b", zk.WorldACL(zk.PermRead|zk.PermWrite), -1))
	must(nil, c.Delete("/app/gone", -1))
	must(c.Create("/app/jobs", nil, 0, open))
	must(c.Create("/app/jobs/job-", []byte("j"), zk.FlagSequence, open))
	must(c.Multi(&zk.CreateRequest{Path: "/app/m1", Data: []byte("1"), Acl: open}, &zk.CreateRequest{Path: "/app/m2", Acl: open}, &zk.SetDataRequest{Path: "/app/a", Data: []byte("a"), Version: -1}))
	if err := c.AddAuth("digest", []byte("bob:secret")); err != nil {
		t.Fatal(err)
	}
	must(c.Create("/private", []byte("p"), 0, zk.AuthACL(zk.PermAll)))
	must(c.Create("/top", []byte("t"), 0, open))
	must(c.Create("/app/live", []byte("e"), zk.FlagEphemeral, open))
	return c
}

// zxidValue is a zxid's value in a difference line; wantDiff writes it as "0x?", since
// zetcd's values depend on etcd's revisions.
var zxidValue = regexp.MustCompile(`0x[0-9a-f]+ \(rank`)

// wantDiff checks a diff's exit status and its output lines, in order.
func wantDiff(t *testing.T, r result, code int, lines ...string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(zxidValue.ReplaceAllString(r.out, "0x? (rank"), "\n"), "\n")
	if r.code != code || !slices.Equal(got, lines) {
		t.Errorf("diff: exit %d, want %d; stderr %q; stdout:\n%s\nwant:\n%s", r.code, code, r.err, r.out, strings.Join(lines, "\n"))
	}
}

func TestDiffSelf(t *testing.T) {
	addr := testenv.StartZetcd(t)
	applyWrites(t, addr)
	defer func(n int64) { progressEvery = n }(progressEvery)
	progressEvery = 5
	r := diffRun(t, "--from", addr, "--to", addr, "--progress")
	wantDiff(t, r, 0, "12 nodes compared, 0 differences")
	// Two workers may print their lines in either order.
	if lines := strings.Split(r.err, "\n"); len(lines) != 3 || !slices.Contains(lines, "zkctl: diff: 5 nodes compared") || !slices.Contains(lines, "zkctl: diff: 10 nodes compared") {
		t.Errorf("progress: %q", r.err)
	}
	// --from defaults to --server; /zookeeper is compared on request.
	r = diffRunG(t, []string{"--server", addr}, "--to", addr, "--system")
	wantDiff(t, r, 0, "15 nodes compared, 0 differences")
	r = diffRun(t, "--from", addr, "--to", addr, "/app/a")
	wantDiff(t, r, 0, "2 nodes compared, 0 differences")
	// Each side has its own chroot: /a is /app/a on one, /app/a/a (none) on the other.
	r = diffRun(t, "--from", addr+"/app", "--to", addr+"/app/a", "/a")
	wantDiff(t, r, 1, "/a: only on from (2 nodes)", "2 nodes compared, 1 differences")
}

// TestDiffZooKeeper applies the same writes to ZooKeeper and to zetcd: data, ACLs, versions
// and zxid ranks agree; times and session ids cannot. The ranks agree although ZooKeeper's
// zxids count transactions that leave no zxid in any Stat (createSession, setACL), and
// although the multi's three writes share one zxid on both servers: ranking keeps only order
// and equality.
func TestDiffZooKeeper(t *testing.T) {
	zkAddr := testenv.StartZooKeeper(t)
	zetcdAddr := testenv.StartZetcd(t)
	applyWrites(t, zkAddr)
	// Every zetcd time is later than every ZooKeeper one.
	time.Sleep(10 * time.Millisecond)
	applyWrites(t, zetcdAddr)
	diff := func(args ...string) result {
		t.Helper()
		return diffRun(t, append([]string{"--from", zkAddr, "--to", zetcdAddr}, args...)...)
	}
	authDiff := func(args ...string) result {
		t.Helper()
		return diffRunG(t, []string{"--auth", "bob:secret"}, append([]string{"--from", zkAddr, "--to", zetcdAddr}, args...)...)
	}

	r := diff()
	// Without bob's credentials nothing of /private can be read, on either server.
	created := []string{"/app", "/app/a", "/app/a/x", "/app/b", "/app/jobs", "/app/jobs/job-0000000000", "/app/live", "/app/m1", "/app/m2", "/top"}
	var want []string
	for _, p := range created {
		want = append(want, p+": ctime", p+": mtime")
		if p == "/app/live" {
			want = append(want, p+": ephemeralOwner")
		}
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(r.out, "\n"), "\n") {
		if m := regexp.MustCompile(`^(/\S*: \w+): `).FindStringSubmatch(line); m != nil {
			got = append(got, m[1])
		} else {
			got = append(got, line)
		}
	}
	slices.Sort(got)
	want = append(want, "12 nodes compared, 21 differences")
	slices.Sort(want)
	if r.code != 1 || !slices.Equal(got, want) {
		t.Errorf("diff: exit %d, stderr %q, stdout:\n%s\nwant the fields %q", r.code, r.err, r.out, want)
	}
	if !strings.Contains(r.out, "/app/live: ephemeralOwner: 0x") {
		t.Errorf("diff: %s", r.out)
	}
	wantDiff(t, diff("--skip-times", "--skip-owners"), 0, "12 nodes compared, 0 differences")
	wantDiff(t, diff("--skip-times", "--skip-owners", "--system"), 0, "15 nodes compared, 0 differences")
	wantDiff(t, authDiff("--skip-times", "--skip-owners"), 0, "12 nodes compared, 0 differences")
	if r := authDiff("/private"); !strings.Contains(r.out, "/private: ctime: ") {
		t.Errorf("diff with bob's credentials compared no times of /private: %+v", r)
	}
	wantDiff(t, diff("--from-auth", "bob:secret", "/private"), 1,
		`/private: data: "p" != <NoAuth>`, "/private: acl: digest:bob:"+digest+":cdrwa != <NoAuth>",
		"/private: children: listed != <NoAuth>", "1 nodes compared, 3 differences")

	// One node changed on zetcd: its data, version and mzxid. ZooKeeper's mzxid is /top's
	// czxid, just older than /app/live's (/private's, unreadable, is not ranked); zetcd's is
	// the newest, after both.
	c := testenv.Connect(t, zetcdAddr)
	if _, err := c.Set("/top", []byte("u"), -1); err != nil {
		t.Fatal(err)
	}
	wantDiff(t, diff("--skip-times", "--skip-owners"), 1,
		`/top: data: "t" != "u"`, "/top: version: 0 != 1", "/top: mzxid: 0x? (rank 10) != 0x? (rank 12)", "12 nodes compared, 3 differences")
	wantDiff(t, diff("--skip-times", "--skip-owners", "--skip-zxids"), 1,
		`/top: data: "t" != "u"`, "/top: version: 0 != 1", "12 nodes compared, 2 differences")
	wantDiff(t, diff("--skip-times", "--skip-owners", "--ignore", "/top", "--ignore", "/zookeeper"), 0,
		"11 nodes compared, 0 differences")

	// A subtree on zetcd only: one line for it, and its parent's child counts and pzxid. On
	// ZooKeeper /app's pzxid is /app/live's czxid; on zetcd it is newer and a zxid of its own.
	for _, p := range []string{"/app/extra", "/app/extra/p", "/app/extra/p/q"} {
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	wantDiff(t, diff("--skip-times", "--skip-owners", "/app"), 1,
		"/app: cversion: 8 != 9", "/app: numChildren: 6 != 7", "/app: pzxid: 0x? (rank 9) != 0x? (rank 10)",
		"/app/extra: only on to (3 nodes)", "12 nodes compared, 4 differences")
	r = diffRunG(t, []string{"--json"}, "--from", zkAddr, "--to", zetcdAddr, "/app/extra")
	if r.code != 1 || r.out != `{"field":"only","nodes":3,"on":"to","path":"/app/extra"}`+"\n"+`{"differences":1,"nodes":3}`+"\n" {
		t.Errorf("diff --json: %+v", r)
	}
}

func TestDiffErrors(t *testing.T) {
	addr := testenv.StartZetcd(t)
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--from", addr}, "zkctl: --to is required (usage: zkctl diff "},
		{[]string{"--from", addr, "--to", addr, "a"}, "zkctl: path \"a\" must start with '/' (usage: zkctl diff "},
		{[]string{"--from", addr, "--to", addr, "/a", "/b"}, "zkctl: want 0 to 1 arguments, got 2 (usage: zkctl diff "},
		{[]string{"--from", addr, "--to", "127.0.0.1:1"}, "zkctl: diff: --to: connect 127.0.0.1:1: "},
		{[]string{"--from", "127.0.0.1:1", "--to", addr}, "zkctl: diff: --from: connect 127.0.0.1:1: "},
		{[]string{"--from", addr, "--to", addr, "/nowhere"}, "zkctl: diff: /nowhere exists on neither server\n"},
	} {
		r := diffRunG(t, []string{"--timeout", "1s"}, tc.args...)
		if r.code != 2 || r.out != "" || !strings.HasPrefix(r.err, tc.err) {
			t.Errorf("diff %q: %+v, want exit 2 and %q", tc.args, r, tc.err)
		}
	}
}

func TestDiffInterrupted(t *testing.T) {
	addr := testenv.StartZetcd(t)
	applyWrites(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	e := &env{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	if code := e.run([]string{"diff", "--from", addr, "--to", addr}); code != 2 || out.String() != "" || errb.String() != "zkctl: diff: context canceled\n" {
		t.Errorf("interrupted diff: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// TestCompareZxids checks the ranking: zxids differ in value but not in order, then in order.
func TestCompareZxids(t *testing.T) {
	d := &differ{zxids: []zxidPair{
		{"/a", [3]int64{1, 5, 1}, [3]int64{100, 900, 100}},
		{"/b", [3]int64{3, 3, 3}, [3]int64{300, 300, 300}},
	}}
	d.compareZxids()
	if len(d.diffs) != 0 {
		t.Errorf("same order: %+v", d.diffs)
	}
	d = &differ{zxids: []zxidPair{
		{"/a", [3]int64{1, 5, 1}, [3]int64{100, 900, 100}},
		{"/b", [3]int64{3, 3, 3}, [3]int64{50, 300, 50}},
	}}
	d.compareZxids()
	var got []string
	for _, x := range d.diffs {
		got = append(got, x.path+" "+x.field+" "+x.from+" "+x.to)
	}
	want := []string{
		"/a czxid 0x1 (rank 0) 0x64 (rank 1)",
		"/a mzxid 0x5 (rank 2) 0x384 (rank 3)",
		"/a pzxid 0x1 (rank 0) 0x64 (rank 1)",
		"/b czxid 0x3 (rank 1) 0x32 (rank 0)",
		"/b mzxid 0x3 (rank 1) 0x12c (rank 2)",
		"/b pzxid 0x3 (rank 1) 0x32 (rank 0)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("compareZxids:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestComparePaths(t *testing.T) {
	paths := []string{"/a-b", "/a/b", "/", "/a", "/b", "/a/b/c", "/ab", "/a/a"}
	slices.SortFunc(paths, comparePaths)
	want := []string{"/", "/a", "/a/a", "/a/b", "/a/b/c", "/a-b", "/ab", "/b"}
	if !slices.Equal(paths, want) {
		t.Errorf("sorted %q, want %q", paths, want)
	}
}

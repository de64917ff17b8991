package itest

import (
	"bytes"
	"os/exec"
	"testing"
)

// BuildZkctl builds cmd/zkctl once per test binary.
var BuildZkctl = GoBinary("github.com/zetcd/zetcd/cmd/zkctl", "zkctl")

// DiffTrees runs `zkctl diff --from from --to to args...` (docs/migration.md) and fails t on
// any difference, or if zkctl cannot compare; its report is logged.
func DiffTrees(t testing.TB, from, to string, args ...string) {
	t.Helper()
	zkctl, err := BuildZkctl()
	if err != nil {
		t.Fatalf("build zkctl: %v", err)
	}
	cmd := exec.Command(zkctl, append([]string{"diff", "--from", from, "--to", to}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("zkctl diff %v: %v\n%s", args, err, out.String())
	}
	t.Logf("zkctl diff %v:\n%s", args, out.String())
}

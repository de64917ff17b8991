package clients

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zetcd/zetcd/internal/testkit/testenv"
)

// zkCli's quota commands (setquota -n/-b soft, -N/-B hard, listquota, delquota) run
// testdata/zkcli_quota.txt on every server, with and without quota enforcement
// (zookeeper.enforceQuota, zetcd's --enforce-quota): zkCli prints the limits and statistics
// nodes the server keeps, and the writes it refuses. zkCli itself refuses a quota above or
// below another; the nested one here is made in the other order.
func TestZkCliQuota(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("testdata", "zkcli_quota.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, enforced := range []bool{false, true} {
		t.Run(fmt.Sprintf("enforced=%v", enforced), func(t *testing.T) {
			onEveryServerWith(t, testenv.ServerOptions{EnforceQuota: enforced}, "zkCli zkcli_quota.txt", zkCliQuotaWant(enforced),
				func(t *testing.T, addr string) []string { return runZkCli(t, addr, string(script), nil) })
		})
	}
}

// zkCliQuotaWant is what zkcli_quota.txt prints on ZooKeeper 3.9.6, stdout then stderr.
func zkCliQuotaWant(enforced bool) []string {
	const limits = "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3"
	if !enforced {
		return slices.Concat(zkCliOpened, []string{
			"Output quota for /q " + limits,
			"Output stat for /q count=4,bytes=3",
			limits,
			"count=4,bytes=3",
			"Output quota for /q " + limits,
			"Output stat for /q count=5,bytes=5",
			"[Warning]: the count quota you create is less than the existing count:5",
			"Output quota for /q count=-1,bytes=-1=;byteHardLimit=6;countHardLimit=3",
			"Output stat for /q count=5,bytes=5",
			"Output quota for /in/deep count=-1,bytes=100=;byteHardLimit=-1;countHardLimit=-1",
			"Output stat for /in/deep count=2,bytes=2",
			"Output quota for /q count=-1,bytes=-1=;byteHardLimit=6;countHardLimit=-1",
			"Output stat for /q count=4,bytes=14",
		}, zkCliClosed, []string{
			"--- stderr",
			"Created /q",
			"Created /q/a",
			"Created /q/b",
			"Created /q/c",
			"absolute path is /zookeeper/quota/q/zookeeper_limits",
			"Created /q/d",
			"absolute path is /zookeeper/quota/q/zookeeper_limits",
			"/q/c has a parent /q which has a quota",
			"absolute path is /zookeeper/quota/q/zookeeper_limits",
			"Created /in",
			"Created /in/deep",
			"/in has a child /in/deep which has a quota",
			"Created /in/deep/x",
			"absolute path is /zookeeper/quota/in/deep/zookeeper_limits",
			"absolute path is /zookeeper/quota/q/zookeeper_limits",
			"absolute path is /zookeeper/quota/q/zookeeper_limits",
			"quota for /q does not exist.",
		})
	}
	return slices.Concat(zkCliOpened, []string{
		"Output quota for /q " + limits,
		"Output stat for /q count=3,bytes=2",
		limits,
		"count=3,bytes=2",
		"Output quota for /q " + limits,
		"Output stat for /q count=3,bytes=4",
		"Output quota for /q count=-1,bytes=-1=;byteHardLimit=6;countHardLimit=3",
		"Output stat for /q count=3,bytes=4",
		"Output quota for /in/deep count=-1,bytes=100=;byteHardLimit=-1;countHardLimit=-1",
		"Output stat for /in/deep count=2,bytes=2",
		"Output quota for /q count=-1,bytes=-1=;byteHardLimit=6;countHardLimit=-1",
		"Output stat for /q count=3,bytes=4",
	}, zkCliClosed, []string{
		"--- stderr",
		"Created /q",
		"Created /q/a",
		"Created /q/b",
		"Quota has exceeded : /q/c",
		"absolute path is /zookeeper/quota/q/zookeeper_limits",
		"Quota has exceeded : /q/d",
		"absolute path is /zookeeper/quota/q/zookeeper_limits",
		"/q/c does not exist.",
		"absolute path is /zookeeper/quota/q/zookeeper_limits",
		"Quota has exceeded : /q/b",
		"Created /in",
		"Created /in/deep",
		"/in has a child /in/deep which has a quota",
		"Created /in/deep/x",
		"absolute path is /zookeeper/quota/in/deep/zookeeper_limits",
		"Node does not exist: /q/d",
		"absolute path is /zookeeper/quota/q/zookeeper_limits",
		"absolute path is /zookeeper/quota/q/zookeeper_limits",
		"quota for /q does not exist.",
	})
}

package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zetcd/zetcd/etcdstore"
)

func TestParseEnsembleFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.ensemble.publish || o.ensemble.advertise != nil || o.ensemble.grace != etcdstore.DefaultEnsembleGrace {
		t.Errorf("defaults: %+v, %v", o.ensemble, err)
	}
	o, err = parseFlags([]string{"--advertise-client-addr", "zk-1.example.com:2181", "--advertise-client-addr", "10.0.0.5:2281",
		"--publish-ensemble", "--publish-ensemble-grace", "5s"})
	if err != nil || !o.ensemble.publish || o.ensemble.grace != 5*time.Second ||
		!slices.Equal(o.ensemble.advertise, []string{"zk-1.example.com:2181", "10.0.0.5:2281"}) {
		t.Errorf("set: %+v, %v", o.ensemble, err)
	}
	for _, bad := range [][]string{
		{"--advertise-client-addr", "0.0.0.0:2181"},
		{"--advertise-client-addr", "[::]:2181"},
		{"--advertise-client-addr", ":2181"},
		{"--advertise-client-addr", "zk-1"},
		{"--publish-ensemble"},
		{"--advertise-client-addr", "10.0.0.5:2181", "--publish-ensemble-grace", "0s"},
	} {
		_, err := parseFlags(bad)
		if err == nil {
			t.Errorf("%v accepted", bad)
			continue
		}
		if strings.Contains(strings.Join(bad, " "), "0.0.0.0") && !strings.Contains(err.Error(), "wildcard") {
			t.Errorf("%v refused without saying why: %v", bad, err)
		}
	}
}

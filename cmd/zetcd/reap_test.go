package main

import (
	"testing"
	"time"

	"github.com/zetcd/zetcd/etcdstore"
)

func TestParseReapInterval(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.reapInterval != etcdstore.DefaultReapInterval {
		t.Errorf("default --reap-interval: %v, %v; want %v", o.reapInterval, err, etcdstore.DefaultReapInterval)
	}
	o, err = parseFlags([]string{"--reap-interval", "250ms"})
	if err != nil || o.reapInterval != 250*time.Millisecond {
		t.Errorf("--reap-interval 250ms: %v, %v", o.reapInterval, err)
	}
	if o, err = parseFlags([]string{"--reap-interval", "0"}); err != nil || o.reapInterval != 0 {
		t.Errorf("--reap-interval 0 (disabled): %v, %v", o.reapInterval, err)
	}
	if _, err := parseFlags([]string{"--reap-interval", "-1s"}); err == nil {
		t.Error("--reap-interval -1s accepted")
	}
}

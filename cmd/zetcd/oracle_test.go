package main

import (
	"testing"

	"github.com/zetcd/zetcd/xchk"
)

func TestParseOracleFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.oracle != "" || o.oracleAnswer != xchk.AnswerZetcd || o.oracleFailFast {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"--oracle", "127.0.0.1:2181", "--oracle-answer", "zookeeper", "--oracle-fail-fast"})
	if err != nil || o.oracle != "127.0.0.1:2181" || o.oracleAnswer != xchk.AnswerZooKeeper || !o.oracleFailFast {
		t.Errorf("%+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"--oracle-answer", "etcd"}); err == nil {
		t.Error("--oracle-answer etcd accepted")
	}
}

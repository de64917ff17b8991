package main

import (
	"errors"
	"flag"
	"time"

	"github.com/zetcd/zetcd/etcdstore"
)

// ensembleOptions are the flags of the ensemble clients see in /zookeeper/config
// (etcdstore/ensemble.go; docs/operating.md, "Ensemble discovery").
type ensembleOptions struct {
	advertise []string      // --advertise-client-addr, in order
	publish   bool          // --publish-ensemble
	grace     time.Duration // --publish-ensemble-grace
}

func (e *ensembleOptions) register(fs *flag.FlagSet) {
	fs.Func("advertise-client-addr", "host:port clients should use for this process (repeatable: the first is published); not a wildcard address; see docs/operating.md, \"Ensemble discovery\"", func(s string) error {
		if err := etcdstore.CheckAdvertiseAddr(s); err != nil {
			return err
		}
		e.advertise = append(e.advertise, s)
		return nil
	})
	fs.BoolVar(&e.publish, "publish-ensemble", false, "while elected, list the live zetcd processes' advertised addresses in /zookeeper/config for clients (Curator's EnsembleTracker); every process of a prefix should agree")
	fs.DurationVar(&e.grace, "publish-ensemble-grace", etcdstore.DefaultEnsembleGrace, "how long a process must be up, or gone, before /zookeeper/config lists, or drops, it")
}

func (e *ensembleOptions) check() error {
	if e.publish && len(e.advertise) == 0 {
		return errors.New("--publish-ensemble needs --advertise-client-addr: the address clients should use for this process")
	}
	if e.grace <= 0 {
		return errors.New("--publish-ensemble-grace must be positive")
	}
	return nil
}

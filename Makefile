# zetcd: `make help` lists the targets.

GO       ?= go
FUZZTIME ?= 30s
ARGS     ?=
# The whole suite, as CI runs it (.ci/run calls `make test`): about 15 minutes on 2 cores. The
# timeout is per package and is there for a hung run: the longest package, ./integration, takes about
# 8.5 minutes alone and 11 with a second suite beside it; 45m keeps a hung run inside CI's limit.
TESTFLAGS ?= -race -count=1 -timeout 45m

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

.PHONY: help build run test test-all zookeeper kafka curator node bench bench-memory bench-scale fuzz verify clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

build: ## build the commands in cmd/ into bin/
	$(GO) build -o bin/ ./cmd/...

run: build ## run bin/zetcd: embedded etcd, ZooKeeper protocol on 127.0.0.1:2181 (flags: ARGS='...')
	bin/zetcd $(ARGS)

test: ## the whole test suite, real-ZooKeeper tests included (fetches ZooKeeper when java and mvn are there)
	@if [[ -n "$${ZETCD_ZOOKEEPER_LIB:-}" ]]; then \
		:; \
	elif command -v java >/dev/null && command -v mvn >/dev/null; then \
		tools/zookeeper/fetch.sh; \
	else \
		echo "make test: no java or mvn, so the real-ZooKeeper tests will skip (Debian: apt-get install default-jre-headless maven)" >&2; \
	fi
	$(GO) test $(TESTFLAGS) ./...

test-all: zookeeper ## fetch ZooKeeper, then the whole suite with real-ZooKeeper tests required
	ZETCD_REQUIRE_ZOOKEEPER=1 $(GO) test $(TESTFLAGS) ./...

zookeeper: ## fetch Apache ZooKeeper's jars from Maven Central into .cache/zookeeper (needs java, mvn)
	tools/zookeeper/fetch.sh

kafka: ## fetch a Kafka 3.9 broker's jars from Maven Central into .cache/kafka, for the SASL broker test (needs mvn)
	tools/mavenjars.sh kafka 'kafka_2.13-*.jar'

curator: ## fetch Apache Curator's recipes from Maven Central into .cache/curator, for the Curator tests (needs mvn)
	tools/mavenjars.sh curator 'curator-recipes-*.jar'

node: ## install node-zookeeper-client from npm into .cache/node, for the Node.js client test (needs node, npm)
	mkdir -p .cache/node
	cp tools/node/package.json tools/node/package-lock.json .cache/node/
	cd .cache/node && npm ci --no-audit --no-fund

bench: build zookeeper ## zkboom against bare etcd, zetcd and ZooKeeper, then the same rate offered to zetcd and ZooKeeper, their reads and every server's writes with the server on one core and zkboom on another, then bench-scale's and bench-memory's steps (~65 min; the 10M-znode step needs ~16 GiB of free memory): docs/benchmarks.md
	$(GO) build -o bin/ ./tools/bench/benchetcd
	@if [[ ! -x .cache/benchvenv/bin/python ]]; then \
		echo "bench: matplotlib for the plot, into .cache/benchvenv"; \
		python3 -m venv .cache/benchvenv && .cache/benchvenv/bin/pip install -q matplotlib \
			|| echo "bench: no matplotlib; the report goes without the plot" >&2; \
	fi
	$(GO) run ./tools/bench --bin bin

bench-memory: build zookeeper ## memory per znode, session and watch, zetcd vs ZooKeeper (~3 min): docs/benchmarks.md
	$(GO) run ./tools/bench --bin bin --only memory

bench-scale: build zookeeper ## sequential creates in one parent, watch latency (bare etcd too, in rounds), load, gets, 4lw, restart and import with 1M and with 10M znodes, zetcd vs ZooKeeper (~45 min; 10M needs ~16 GiB of free memory): docs/benchmarks.md
	$(GO) build -o bin/ ./tools/bench/benchetcd
	$(GO) run ./tools/bench --bin bin --matrix=false --equal-load=false --own-core=false --own-core-writes=false --memory=false

fuzz: ## run each fuzz target in ./encoding and ./internal/sasl for FUZZTIME (default 30s)
	for pkg in ./encoding ./internal/sasl; do \
		list=$$($(GO) test -list '^Fuzz' $$pkg); \
		targets=$$(grep '^Fuzz' <<<"$$list" || true); \
		if [[ -z "$$targets" ]]; then echo "no fuzz targets in $$pkg" >&2; exit 1; fi; \
		for f in $$targets; do \
			echo "== $$pkg $$f"; \
			$(GO) test -run='^$$' -fuzz="^$$f\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

verify: ## gofmt, go vet, staticcheck, go.mod/go.sum tidy
	@unformatted=$$(gofmt -l .); \
	if [[ -n "$$unformatted" ]]; then echo "gofmt -l: not formatted:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	@staticcheck=$$(command -v staticcheck || true); \
	if [[ -z "$$staticcheck" ]]; then \
		bindir=$$($(GO) env GOBIN); [[ -n "$$bindir" ]] || bindir=$$($(GO) env GOPATH)/bin; \
		staticcheck=$$bindir/staticcheck; \
	fi; \
	if [[ ! -x "$$staticcheck" ]]; then \
		echo "installing staticcheck"; $(GO) install honnef.co/go/tools/cmd/staticcheck@latest; \
	fi; \
	echo "$$staticcheck ./..."; "$$staticcheck" ./...
	$(GO) mod tidy -diff

clean: ## remove bin/ (keeps the fetched ZooKeeper in .cache/)
	rm -rf bin

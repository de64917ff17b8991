package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/etcdstore"
	"github.com/zetcd/zetcd/internal/embedetcd"
	"github.com/zetcd/zetcd/internal/zkdata"
)

// `zetcd import --zk-data-dir DIR [storage flags]` writes the tree of a stopped ZooKeeper's data
// directory into zetcd's storage (etcdstore.Import): the embedded etcd in --data-dir, or the
// etcd of --endpoints under --prefix, with zetcd's own etcd flags. See docs/migration.md.

// importOptions are the import command's flags: zetcd's storage flags and its own.
type importOptions struct {
	options
	zkDataDir       string
	zxids           string
	maxPadding      int64
	maxRequestBytes int
}

// parseImportFlags parses the import command's line (args after "import").
func parseImportFlags(args []string, stderr io.Writer) (importOptions, error) {
	var o importOptions
	fs := flag.NewFlagSet("zetcd import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.register(fs)
	fs.StringVar(&o.zkDataDir, "zk-data-dir", "", "ZooKeeper's data directory (dataDir, or dataLogDir if the logs are apart: the one holding version-2); ZooKeeper must be stopped")
	fs.StringVar(&o.zxids, "zxids", string(etcdstore.ImportAuto), "auto: ZooKeeper's zxids exactly where possible, else renumbered in order; exact: exactly or fail; renumber: renumbered in order")
	fs.Int64Var(&o.maxPadding, "max-padding", etcdstore.DefaultMaxPadding, "most etcd revisions spent moving etcd's revision to ZooKeeper's zxids")
	fs.IntVar(&o.maxRequestBytes, "etcd-max-request-bytes", 3<<19, "with --endpoints, the external etcd's --max-request-bytes, which each transaction stays within")
	if err := o.parse(fs, args); err != nil {
		return o, err
	}
	switch etcdstore.ImportZxids(o.zxids) {
	case etcdstore.ImportAuto, etcdstore.ImportExact, etcdstore.ImportRenumber:
	default:
		return o, fmt.Errorf("--zxids %q: want auto, exact or renumber", o.zxids)
	}
	if o.zkDataDir == "" {
		return o, errors.New("--zk-data-dir is required")
	}
	if o.maxPadding < 0 {
		return o, errors.New("--max-padding must not be negative")
	}
	return o, nil
}

// runImport loads the ZooKeeper directory and writes it into zetcd's storage. etcd is started
// only once the directory has been read: a wrong path leaves no etcd data directory behind. A
// new embedded etcd is not started at all: the import writes its database, on which zetcd
// starts it.
func runImport(o importOptions, log *zap.Logger) (etcdstore.ImportResult, error) {
	start := time.Now()
	st, err := zkdata.Load(o.zkDataDir, zkdata.Options{Log: log.Named("zkdata"), Progress: loadProgress(log)})
	if err != nil {
		return etcdstore.ImportResult{}, fmt.Errorf("read ZooKeeper's data directory: %w", err)
	}
	log.Info("ZooKeeper data loaded", zap.String("dir", o.zkDataDir), zap.Int("nodes", len(st.Nodes)),
		zap.Int("sessions", len(st.Sessions)), zap.String("last-zxid", fmt.Sprintf("%#x", st.LastZxid)),
		zap.String("snapshot", st.Snapshot), zap.Strings("skipped", st.Skipped), zap.Duration("took", time.Since(start)))
	o.bulkLoad = true
	cfg := etcdstore.ImportConfig{
		Prefix:          o.prefix,
		Logger:          log.Named("import"),
		Zxids:           etcdstore.ImportZxids(o.zxids),
		MaxPadding:      o.maxPadding,
		MaxTxnOps:       o.etcdMaxTxnOps,
		MaxRequestBytes: o.maxRequestBytes,
	}
	var etcd *etcdConn
	defer func() {
		if etcd != nil {
			etcd.close()
		}
	}()
	fresh := false
	if o.endpoints == "" {
		if fresh, err = embedetcd.IsNew(o.dataDir); err != nil {
			return etcdstore.ImportResult{}, err
		}
	}
	switch {
	case fresh:
		if err := embedetcd.PrepareBackend(o.dataDir); err != nil {
			return etcdstore.ImportResult{}, err
		}
		cfg.Backend = &etcdstore.ImportBackend{Path: embedetcd.BackendPath(o.dataDir)}
	default:
		if etcd, err = connectEtcd(o.options, log); err != nil {
			return etcdstore.ImportResult{}, err
		}
		cfg.Client, cfg.LeaseClient = etcd.cli, etcd.leases
		if etcd.embedded != nil {
			cfg.MaxTxnOps, cfg.MaxRequestBytes = embedetcd.MaxTxnOps, embedetcd.MaxRequestBytes
		}
	}
	res, err := etcdstore.Import(context.Background(), cfg, st)
	if err != nil {
		return res, err
	}
	log.Info("import finished", zap.Int("nodes", res.Nodes), zap.String("zxids", string(res.Zxids)),
		zap.Int("sessions", res.Sessions), zap.Int("ephemerals", res.Ephemerals),
		zap.Int64("padding", res.Padding), zap.Duration("took", time.Since(start)))
	if res.Sessions > 0 {
		log.Info("start zetcd within the sessions' timeouts: their clients resume them there, and the elected zetcd expires those that do not come back")
	}
	switch {
	case res.ZxidTable:
		log.Info("zxids were renumbered in etcd; Stats show ZooKeeper's through the table of zxids", zap.String("why", res.Why))
	case res.Why != "":
		log.Warn("zxids were renumbered in order; Stats keep their order, not ZooKeeper's values", zap.String("why", res.Why))
	}
	if !res.ResumeOK {
		log.Warn("zetcd's zxids stay below ZooKeeper's last zxid: clients that saw ZooKeeper must start new ZooKeeper handles (a reconnect is refused)")
	}
	return res, nil
}

// loadProgress logs the load's progress every few seconds.
func loadProgress(log *zap.Logger) func(zkdata.Progress) {
	var last time.Time
	return func(p zkdata.Progress) {
		if time.Since(last) < 2*time.Second {
			return
		}
		last = time.Now()
		log.Info("loading ZooKeeper data", zap.String("file", p.File), zap.Int("files", p.Files),
			zap.Int("nodes", p.Nodes), zap.Int64("txns", p.Txns))
	}
}

// importGC sets the import's collector, unless GOGC or GOMEMLIMIT is set. The import's live heap
// is ZooKeeper's whole tree and the plan of its keys, built once and dropped at the end; a
// collector marking that heap over and over as it grows spends a quarter of the import's CPU
// at a million znodes. So the collector stays off until the heap reaches three quarters of the
// machine's memory (or of its cgroup's limit), where it runs again as Go's memory limit makes
// it: at a million znodes of 128 bytes, 2.1 GiB of peak RSS against 1.8 with GOGC 300, and 2 s
// of CPU less. Where the memory cannot be read, GOGC is 300.
func importGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if mem := machineMemory(); mem > 0 {
		debug.SetMemoryLimit(mem / 4 * 3)
		debug.SetGCPercent(-1)
		return
	}
	debug.SetGCPercent(300)
}

// machineMemory is the memory this process may use: the machine's, or its cgroup's limit if
// lower; 0 if unknown.
func machineMemory() int64 {
	var total int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if kb, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
				total = n << 10
			}
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(f); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
				total = n
			}
		}
	}
	return total
}

// importMain is `zetcd import`: it returns the exit status.
func importMain(args []string, stderr io.Writer) int {
	o, err := parseImportFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "zetcd import:", err)
		return 2
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "zetcd import:", err)
		return 2
	}
	defer log.Sync()
	importGC()
	if _, err := runImport(o, log); err != nil {
		// One line for the operator: the error names the file, offset or key; a stack says nothing.
		log.WithOptions(zap.AddStacktrace(zap.FatalLevel)).Error("import failed", zap.Error(err))
		return 1
	}
	return 0
}

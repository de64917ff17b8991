package zetcd

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/zetcd/zetcd/encoding"
)

// Four-letter words (FourLetterCommands): a fresh connection whose first four bytes spell a command
// gets plain text in ZooKeeper 3.9's exact format, then the connection is closed. Labels, keys
// and line order are ZooKeeper's, so that its tools (zkServer.sh status, kazoo's
// server_version, Solr's and HBase's status pages, Prometheus exporters scraping mntr) read
// zetcd as they read ZooKeeper; values are zetcd's. Numbers about the tree and the watches come
// from the backend's StatsSource; only dump reads every session's ephemeral nodes.

// DefaultFourLetterWords are the words answered when Config.FourLetterWords is nil. ZooKeeper
// 3.5+ answers only srvr by default; zetcd answers the read-only, cheap-enough set its users'
// tools rely on. srvr is answered whatever the list says, as in ZooKeeper.
var DefaultFourLetterWords = []string{"ruok", "srvr", "stat", "mntr", "conf", "envi", "isro", "cons", "wchs", "dirs"}

// fourLetterCommands maps each four-letter word zetcd answers to the function producing its
// output. A word outside the whitelist, or one ZooKeeper knows and zetcd does not answer
// (stmk, hash), gets ZooKeeper's refusal sentence. Adding a command means adding a row.
var fourLetterCommands = map[string]func(*commandRun) string{
	"ruok": func(*commandRun) string { return "imok" },
	"isro": (*commandRun).isro,
	"gtmk": func(r *commandRun) string { return strconv.FormatInt(r.s.traceMask.Load(), 10) },
	"srvr": (*commandRun).srvr,
	"stat": (*commandRun).stat,
	"mntr": (*commandRun).mntr,
	"conf": (*commandRun).conf,
	"envi": (*commandRun).envi,
	"cons": (*commandRun).cons,
	"crst": (*commandRun).crst,
	"srst": (*commandRun).srst,
	"wchs": (*commandRun).wchs,
	"wchc": (*commandRun).wchc,
	"wchp": (*commandRun).wchp,
	"dump": (*commandRun).dump,
	"dirs": (*commandRun).dirs,
}

const (
	// fourLetterTimeout bounds the backend requests of one four-letter word.
	fourLetterTimeout = 5 * time.Second
	// defaultTraceMask is ZooKeeper's default trace mask (ZooTrace), what gtmk answers until
	// the AdminServer's set_trace_mask changes it. zetcd has no tracing: the mask is kept and
	// reported, nothing more.
	defaultTraceMask = 306
	// notServing is ZooKeeper's answer when it cannot serve (here: the backend is unreachable).
	notServing = "This ZooKeeper instance is not currently serving requests\n"
)

// ParseFourLetterWords parses a comma-separated whitelist ("ruok, srvr", or "*" for every
// word). It rejects words zetcd does not answer, so that a typo does not silently disable one.
func ParseFourLetterWords(s string) ([]string, error) {
	var words []string
	for _, w := range strings.Split(s, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		if w == "" {
			continue
		}
		if _, ok := fourLetterCommands[w]; !ok && w != "*" {
			known := make([]string, 0, len(fourLetterCommands))
			for k := range fourLetterCommands {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown four-letter word %q (known: %s, or * for all)", w, strings.Join(known, ", "))
		}
		words = append(words, w)
	}
	return words, nil
}

// fourLetterWhitelist returns the set of words answered for a Config.FourLetterWords value.
func fourLetterWhitelist(words []string) map[string]bool {
	if words == nil {
		words = DefaultFourLetterWords
	}
	set := map[string]bool{"srvr": true}
	for _, w := range words {
		if w == "*" {
			for k := range fourLetterCommands {
				set[k] = true
			}
			continue
		}
		set[w] = true
	}
	return set
}

// fourLetterWord answers cmd, read in place of the first frame length; the connection is
// closed afterwards.
func (c *clientConn) fourLetterWord(cmd string) {
	c.countReceived(4)
	var out string
	if f, ok := fourLetterCommands[cmd]; ok && c.s.fourLetter[cmd] {
		ctx, cancel := context.WithTimeout(c.ctx, fourLetterTimeout)
		out = f(&commandRun{s: c.s, ctx: ctx, warn: c.log.Warn, port: localPort(c.nc), what: "four-letter word"})
		cancel()
	} else {
		out = cmd + " is not executed because it is not in the whitelist.\n"
	}
	c.log.Debug("four-letter word", zap.String("command", cmd))
	if !c.armWrite(handshakeTimeout) {
		return
	}
	c.countPacketSent() // before the write, as the writer counts frames (writer.go)
	if _, err := io.WriteString(c.nc, out); err != nil {
		c.log.Info("write four-letter word answer failed", zap.Error(fmt.Errorf("4lw %s: write: %w", cmd, err)))
		return
	}
	c.graceful.Store(true)
}

// commandRun is one four-letter word or AdminServer command being answered. port is the
// client port conf and configuration report (-1 for none); what names the interface in logs.
type commandRun struct {
	s    *Server
	ctx  context.Context
	warn func(msg string, fields ...zap.Field)
	port int
	what string
}

func (r *commandRun) statsFailed(stats string, err error) {
	r.warn(r.what+": backend stats unavailable", zap.String("stats", stats), zap.Error(err))
}

// localPort is the TCP port nc was accepted on, -1 if it has none.
func localPort(nc net.Conn) int {
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		return a.Port
	}
	return -1
}

// backendStats asks the StatsSource for the cheap numbers; ok is false if it failed (the
// server then answers notServing). Without a StatsSource the numbers are zero.
func (r *commandRun) backendStats() (BackendStats, bool) {
	var st BackendStats
	if r.s.inReadOnlyMode() {
		st = r.s.readOnly.ReadOnlyStats()
	} else if r.s.statsSrc != nil {
		var err error
		if st, err = r.s.statsSrc.Stats(r.ctx); err != nil {
			r.statsFailed("stats", err)
			return st, false
		}
	}
	st.Zxid = max(st.Zxid, encoding.Zxid(r.s.stats.maxZxid.Load()))
	return st, true
}

// treeStats is backendStats for the tree scan.
func (r *commandRun) treeStats() (TreeStats, bool) {
	ts := TreeStats{Ephemerals: map[encoding.SessionID][]string{}}
	if r.s.statsSrc != nil {
		var err error
		if ts, err = r.s.statsSrc.TreeStats(r.ctx); err != nil {
			r.statsFailed("tree", err)
			return ts, false
		}
	}
	return ts, true
}

func (r *commandRun) watches() watchSummary {
	if r.s.statsSrc == nil {
		return summarizeWatches(nil)
	}
	return summarizeWatches(r.s.statsSrc.Watches())
}

// fullVersion is the version as ZooKeeper prints it: "<version>, built on <date> UTC".
func (s *Server) fullVersion() string {
	return s.cfg.Version + ", built on " + buildDate()
}

// buildDate is when this binary was built: the VCS commit time stamped by the Go toolchain, or
// else the executable's modification time, as "2006-01-02 15:04 UTC".
var buildDate = sync.OnceValue(func() string {
	t := time.Now()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.time" {
				if vt, err := time.Parse(time.RFC3339, s.Value); err == nil {
					return vt.UTC().Format("2006-01-02 15:04") + " UTC"
				}
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			t = fi.ModTime()
		}
	}
	return t.UTC().Format("2006-01-02 15:04") + " UTC"
})

// srvrBody is srvr's output after its version line.
func (r *commandRun) srvrBody(st BackendStats) string {
	s := r.s
	minMs, avgMs, maxMs := s.stats.latency()
	var b strings.Builder
	fmt.Fprintf(&b, "Latency min/avg/max: %d/%s/%d\n", minMs, javaDouble(round4(avgMs)), maxMs)
	fmt.Fprintf(&b, "Received: %d\n", s.stats.received.Load())
	fmt.Fprintf(&b, "Sent: %d\n", s.stats.sent.Load())
	fmt.Fprintf(&b, "Connections: %d\n", s.numConnections())
	fmt.Fprintf(&b, "Outstanding: %d\n", s.stats.outstanding.Load())
	fmt.Fprintf(&b, "Zxid: 0x%s\n", strconv.FormatUint(uint64(st.Zxid), 16))
	b.WriteString("Mode: " + s.serverState() + "\n")
	fmt.Fprintf(&b, "Node count: %d\n", st.NodeCount)
	return b.String()
}

func (r *commandRun) srvr() string {
	st, ok := r.backendStats()
	if !ok {
		return notServing
	}
	return "Zookeeper version: " + r.s.fullVersion() + "\n" + r.srvrBody(st)
}

// stat is srvr with the connections (brief) after the version line.
func (r *commandRun) stat() string {
	st, ok := r.backendStats()
	if !ok {
		return notServing
	}
	var b strings.Builder
	b.WriteString("Zookeeper version: " + r.s.fullVersion() + "\n")
	b.WriteString("Clients:\n")
	for _, c := range r.s.connList() {
		c.writeConnInfo(&b, true)
	}
	b.WriteString("\n")
	b.WriteString(r.srvrBody(st))
	return b.String()
}

// cons lists every connection in full, then a blank line.
func (r *commandRun) cons() string {
	var b strings.Builder
	for _, c := range r.s.connList() {
		c.writeConnInfo(&b, false)
	}
	b.WriteString("\n")
	return b.String()
}

func (r *commandRun) crst() string {
	r.s.resetConnStats()
	return "Connection stats reset.\n"
}

// resetConnStats resets every open connection's counters (crst, connection_stat_reset).
func (s *Server) resetConnStats() {
	for _, c := range s.connList() {
		c.st.reset()
	}
}

func (r *commandRun) srst() string {
	r.s.stats.reset()
	return "Server stats reset.\n"
}

// connList returns the open connections, sorted by remote address.
func (s *Server) connList() []*clientConn {
	s.mu.Lock()
	out := make([]*clientConn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].remote < out[j].remote })
	return out
}

// hasSession reports whether the connection serves a session; c.id and c.timeout may be read
// once it does (they are written before established is stored).
func (c *clientConn) hasSession() bool { return c.st.established.Load() != 0 }

// connInfo is what ZooKeeper tells of one connection (ServerCnxn's connection info): the
// brief part for every connection, the rest once it serves a session (hasSession).
type connInfo struct {
	remote                 string
	interest               int // what ZooKeeper shows of the socket's interest set: 1 (reading) once a session is served, 0 before
	queued, received, sent int64
	session                bool // the fields below are set
	id                     encoding.SessionID
	lastOp                 string
	established            int64 // unix ms
	timeout                time.Duration
	lastCxid               int64 // -1 for none
	lastZxid               int64
	lastResp               int64 // unix ms
	latLast, latMin        int64 // ms
	latAvg, latMax         int64 // ms
}

// info reads c's counters; the session's part only unless brief.
func (c *clientConn) info(brief bool) connInfo {
	st := &c.st
	ci := connInfo{remote: c.remote, queued: st.queued.Load(), received: st.received.Load(), sent: st.sent.Load()}
	if c.hasSession() {
		ci.interest = 1
	}
	if brief || !c.hasSession() {
		return ci
	}
	ci.session = true
	ci.id = c.id
	ci.lastOp = "NA"
	if op := st.lastOp.Load(); op != 0 {
		ci.lastOp = lastOpName(encoding.Op(op - 1))
	}
	ci.established = st.established.Load()
	ci.timeout = c.timeout
	ci.lastCxid = st.lastCxid.Load()
	ci.lastZxid = st.lastZxid.Load()
	ci.lastResp = st.lastResp.Load()
	ci.latLast = st.latLast.Load()
	if ci.latMin = st.latMin.Load(); ci.latMin == math.MaxInt64 {
		ci.latMin = 0
	}
	if n := st.latCount.Load(); n > 0 {
		ci.latAvg = st.latTotal.Load() / n
	}
	ci.latMax = st.latMax.Load()
	return ci
}

// writeConnInfo writes one connection's line of stat (brief) or cons, in ZooKeeper's shape:
//
//	/127.0.0.1:51234[1](queued=0,recved=12,sent=12[,sid=0x…,lop=GETD,est=…,to=30000,lcxid=0x…,lzxid=0x…,lresp=…,llat=0,minlat=0,avglat=0,maxlat=3])
func (c *clientConn) writeConnInfo(b *strings.Builder, brief bool) {
	ci := c.info(brief)
	fmt.Fprintf(b, " /%s[%d](queued=%d,recved=%d,sent=%d", ci.remote, ci.interest, ci.queued, ci.received, ci.sent)
	if ci.session {
		fmt.Fprintf(b, ",sid=%s,lop=%s,est=%d,to=%d", hex64(int64(ci.id)), ci.lastOp, ci.established, ci.timeout.Milliseconds())
		if ci.lastCxid >= 0 {
			fmt.Fprintf(b, ",lcxid=%s", hex64(ci.lastCxid))
		}
		fmt.Fprintf(b, ",lzxid=%s,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
			hex64(ci.lastZxid), ci.lastResp, ci.latLast, ci.latMin, ci.latAvg, ci.latMax)
	}
	b.WriteString(")\n")
}

// hex64 formats v as ZooKeeper's "0x" + Long.toHexString: no padding, two's complement for
// negative values.
func hex64(v int64) string { return "0x" + strconv.FormatUint(uint64(v), 16) }

// lastOpName is the four-letter operation name cons shows for the last request of a connection
// (ZooKeeper's names; "NA" for requests it names none for).
func lastOpName(op encoding.Op) string {
	switch op {
	case encoding.OpCloseSession:
		return "CLOS"
	case encoding.OpCreate, encoding.OpCreate2, encoding.OpCreateContainer, encoding.OpCreateTTL:
		return "CREA"
	case encoding.OpDelete, encoding.OpDeleteContainer:
		return "DELE"
	case encoding.OpExists:
		return "EXIS"
	case encoding.OpGetData:
		return "GETD"
	case encoding.OpSetData:
		return "SETD"
	case encoding.OpGetACL:
		return "GETA"
	case encoding.OpSetACL:
		return "SETA"
	case encoding.OpGetChildren, encoding.OpGetChildren2:
		return "GETC"
	case encoding.OpSync:
		return "SYNC"
	case encoding.OpPing:
		return "PING"
	case encoding.OpCheck:
		return "CHEC"
	case encoding.OpMulti:
		return "MULT"
	case encoding.OpReconfig:
		return "RECO"
	case encoding.OpCheckWatches:
		return "CHKW"
	case encoding.OpRemoveWatches:
		return "REMW"
	case encoding.OpMultiRead:
		return "MLTR"
	case encoding.OpSetWatches:
		return "SETW"
	case encoding.OpGetEphemerals:
		return "GETE"
	case encoding.OpGetAllChildrenNumber:
		return "GETACN"
	case encoding.OpSetWatches2:
		return "STW2"
	case encoding.OpAddWatch:
		return "ADDW"
	case encoding.OpWhoAmI:
		return "HOMI"
	}
	return "NA"
}

// field is one named figure of an answer, in ZooKeeper's order: the four-letter words print
// fields as text, the AdminServer as JSON members.
type field struct {
	key string
	val any
}

// mntr lists monitorFields as ZooKeeper prints them: "zk_<key>\t<value>".
func (r *commandRun) mntr() string {
	fields, ok := r.monitorFields()
	if !ok {
		return notServing
	}
	var b strings.Builder
	for _, f := range fields {
		v := f.val
		if d, ok := v.(float64); ok {
			v = javaDouble(d)
		}
		fmt.Fprintf(&b, "zk_%s\t%v\n", f.key, v)
	}
	return b.String()
}

// monitorFields are ZooKeeper 3.9's gauges, in its order, then the counters zetcd has a
// meaning for (mntr, monitor). The gauges are the monitorFigures /metrics exports under the
// same names (zkmetrics.go); ok is false when the backend cannot say.
func (r *commandRun) monitorFields() (fields []field, ok bool) {
	st, ok := r.backendStats()
	if !ok {
		return nil, false
	}
	s := r.s
	f := s.monitorFigures(st, r.watches())
	kv := func(k string, v any) { fields = append(fields, field{k, v}) }
	kv("version", s.fullVersion())
	kv("server_state", s.serverState())
	kv("ephemerals_count", f.ephemerals)
	kv("num_alive_connections", f.connections)
	kv("avg_latency", round4(f.avgLatency))
	kv("outstanding_requests", f.outstanding)
	kv("znode_count", f.znodes)
	kv("global_sessions", f.globalSessions)
	kv("non_mtls_remote_conn_count", 0)
	kv("last_client_response_size", f.lastResp)
	kv("packets_sent", f.packetsSent)
	kv("packets_received", f.packetsReceived)
	kv("max_client_response_size", f.maxResp)
	kv("connection_drop_probability", f.dropProbability)
	kv("watch_count", f.watches)
	kv("auth_failed_count", f.authFailed)
	kv("min_latency", f.minLatency)
	if f.fdOK {
		kv("max_file_descriptor_count", f.maxFDs)
	}
	kv("approximate_data_size", f.dataSize)
	if f.fdOK {
		kv("open_file_descriptor_count", f.openFDs)
	}
	kv("local_sessions", f.localSessions)
	kv("uptime", f.uptime)
	kv("max_latency", f.maxLatency)
	kv("outstanding_tls_handshake", 0)
	kv("min_client_response_size", f.minResp)
	kv("non_mtls_local_conn_count", 0)
	kv("connection_rejected", s.stats.refusedConns.SinceReset())
	kv("bytes_received_count", s.stats.bytesReceived.SinceReset())
	kv("response_bytes", s.stats.bytesSent.SinceReset())
	kv("connection_request_count", s.stats.handshakes.SinceReset())
	return fields, true
}

// serverConfig is the configuration in ZooKeeper's terms (conf, configuration). zetcd has no
// tick: tickTime is half the minimum session timeout, which is how ZooKeeper derives its
// default minimum. The data and log directories are Config.DataDirs.
type serverConfig struct {
	clientPort                           int
	dataDir, dataLogDir                  string
	tickTime                             int64 // ms
	maxClientCnxns                       int
	minSessionTimeout, maxSessionTimeout int64 // ms
}

func (r *commandRun) config() serverConfig {
	cfg := r.s.cfg
	return serverConfig{
		clientPort:        r.port,
		dataDir:           cfg.DataDirs.Snap,
		dataLogDir:        cfg.DataDirs.Log,
		tickTime:          (cfg.MinSessionTimeout / 2).Milliseconds(),
		maxClientCnxns:    cfg.MaxClientCnxns,
		minSessionTimeout: cfg.MinSessionTimeout.Milliseconds(),
		maxSessionTimeout: cfg.MaxSessionTimeout.Milliseconds(),
	}
}

// conf reports serverConfig in ZooKeeper's keys, with the directories' sizes.
func (r *commandRun) conf() string {
	c := r.config()
	var b strings.Builder
	fmt.Fprintf(&b, "clientPort=%d\n", c.clientPort)
	b.WriteString("secureClientPort=-1\n")
	fmt.Fprintf(&b, "dataDir=%s\n", c.dataDir)
	fmt.Fprintf(&b, "dataDirSize=%d\n", dirSize(c.dataDir))
	fmt.Fprintf(&b, "dataLogDir=%s\n", c.dataLogDir)
	fmt.Fprintf(&b, "dataLogSize=%d\n", dirSize(c.dataLogDir))
	fmt.Fprintf(&b, "tickTime=%d\n", c.tickTime)
	fmt.Fprintf(&b, "maxClientCnxns=%d\n", c.maxClientCnxns)
	fmt.Fprintf(&b, "minSessionTimeout=%d\n", c.minSessionTimeout)
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", c.maxSessionTimeout)
	b.WriteString("clientPortListenBacklog=-1\n")
	b.WriteString("serverId=0\n")
	return b.String()
}

func (r *commandRun) dirs() string {
	return fmt.Sprintf("datadir_size: %d\nlogdir_size: %d\n", r.s.dataDirSize(), r.s.logDirSize())
}

// dataDirSize and logDirSize are the sizes of Config.DataDirs (dirs, srvr's JSON form).
func (s *Server) dataDirSize() int64 { return dirSize(s.cfg.DataDirs.Snap) }
func (s *Server) logDirSize() int64  { return dirSize(s.cfg.DataDirs.Log) }

// dirSize is the total size of the regular files under dir; 0 if dir is "" or unreadable.
func dirSize(dir string) int64 {
	if dir == "" {
		return 0
	}
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// envi reports environmentFields as ZooKeeper prints them.
func (r *commandRun) envi() string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, f := range r.s.environmentFields() {
		fmt.Fprintf(&b, "%s=%v\n", f.key, f.val)
	}
	return b.String()
}

// environmentFields is the environment in ZooKeeper's keys and order (envi, environment), all
// strings. The java.* keys describe the Go runtime where they have a counterpart and are
// "<NA>" (ZooKeeper's word for an unset property) where they do not.
func (s *Server) environmentFields() []field {
	na := func(v string, err error) string {
		if err != nil || v == "" {
			return "<NA>"
		}
		return v
	}
	host := na(os.Hostname())
	exe := na(os.Executable())
	userName, userHome := "<NA>", "<NA>"
	if u, err := user.Current(); err == nil {
		userName, userHome = na(u.Username, nil), na(u.HomeDir, nil)
	}
	wd := na(os.Getwd())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	const mb = 1 << 20
	total := int64(ms.Sys)
	maxMem := debug.SetMemoryLimit(-1)
	if maxMem == math.MaxInt64 {
		maxMem = total
	}
	free := total - int64(ms.HeapAlloc)
	return []field{
		{"zookeeper.version", s.fullVersion()},
		{"host.name", host},
		{"java.version", runtime.Version()},
		{"java.vendor", "<NA>"},
		{"java.home", "<NA>"},
		{"java.class.path", exe},
		{"java.library.path", "<NA>"},
		{"java.io.tmpdir", os.TempDir()},
		{"java.compiler", "<NA>"},
		{"os.name", osName()},
		{"os.arch", runtime.GOARCH},
		{"os.version", osVersion()},
		{"user.name", userName},
		{"user.home", userHome},
		{"user.dir", wd},
		{"os.memory.free", strconv.FormatInt(free/mb, 10) + "MB"},
		{"os.memory.max", strconv.FormatInt(maxMem/mb, 10) + "MB"},
		{"os.memory.total", strconv.FormatInt(total/mb, 10) + "MB"},
	}
}

// osName is the operating system's name as Java's os.name spells the common ones.
func osName() string {
	switch runtime.GOOS {
	case "linux":
		return "Linux"
	case "darwin":
		return "Mac OS X"
	case "windows":
		return "Windows"
	case "freebsd":
		return "FreeBSD"
	}
	return runtime.GOOS
}

// osVersion is the kernel release on Linux, "<NA>" elsewhere.
func osVersion() string {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		if v := strings.TrimSpace(string(b)); v != "" {
			return v
		}
	}
	return "<NA>"
}

// wchs summarises the data watches: connections, paths and watches.
func (r *commandRun) wchs() string {
	w := r.watches()
	return fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n", len(w.bySession), len(w.byPath), w.dataCount)
}

// wchc lists the data watches by session.
func (r *commandRun) wchc() string {
	w := r.watches()
	var b strings.Builder
	for _, id := range sortedSessions(w.bySession) {
		b.WriteString(hex64(int64(id)) + "\n")
		for _, p := range w.bySession[id] {
			b.WriteString("\t" + p + "\n")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// wchp lists the data watches by path.
func (r *commandRun) wchp() string {
	w := r.watches()
	paths := make([]string, 0, len(w.byPath))
	for p := range w.byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		b.WriteString(p + "\n")
		for _, id := range w.byPath[p] {
			b.WriteString("\t" + hex64(int64(id)) + "\n")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// dump lists the sessions this zetcd tracks grouped by expiry time, the ephemeral nodes of
// every session (all of etcd's, one tree scan), and the connections grouped by expiry time.
// Expiry times are rounded up to the next tick (tickTime as conf reports it), as ZooKeeper's
// expiry queues round them.
func (r *commandRun) dump() string {
	ts, ok := r.treeStats()
	if !ok {
		return notServing
	}
	s := r.s
	var b strings.Builder

	sets, n := s.sessionSets()
	b.WriteString("SessionTracker dump:\n")
	fmt.Fprintf(&b, "Session Sets (%d)/(%d):\n", len(sets), n)
	for _, at := range sortedTimes(sets) {
		ids := sets[at]
		fmt.Fprintf(&b, "%d expire at %s:\n", len(ids), javaDate(at))
		for _, id := range ids {
			b.WriteString("\t" + hex64(int64(id)) + "\n")
		}
	}

	b.WriteString("ephemeral nodes dump:\n")
	fmt.Fprintf(&b, "Sessions with Ephemerals (%d):\n", len(ts.Ephemerals))
	for _, id := range sortedSessions(ts.Ephemerals) {
		b.WriteString(hex64(int64(id)) + ":\n")
		for _, p := range ts.Ephemerals[id] {
			b.WriteString("\t" + p + "\n")
		}
	}

	b.WriteString("Connections dump:\n")
	conns := s.connList()
	csets := map[time.Time][]*clientConn{}
	now := time.Now()
	for _, c := range conns {
		at := now.Add(handshakeTimeout)
		if c.hasSession() {
			at = time.Unix(0, c.lastActivity.Load()).Add(c.timeout)
		}
		csets[s.expiryBucket(at)] = append(csets[s.expiryBucket(at)], c)
	}
	fmt.Fprintf(&b, "Connections Sets (%d)/(%d):\n", len(csets), len(conns))
	for _, at := range sortedTimes(csets) {
		fmt.Fprintf(&b, "%d expire at %s:\n", len(csets[at]), javaDate(at))
		for _, c := range csets[at] {
			var id int64
			if c.hasSession() {
				id = int64(c.id)
			}
			fmt.Fprintf(&b, "\tip: /%s sessionId: %s\n", c.remote, hex64(id))
		}
	}
	return b.String()
}

// expiryBucket rounds t up to the next tick (tickTime as conf reports it), as ZooKeeper's
// expiry queues (ExpiryQueue) round expiry times.
func (s *Server) expiryBucket(t time.Time) time.Time {
	tick := max(s.cfg.MinSessionTimeout/2, time.Millisecond).Milliseconds()
	return time.UnixMilli((t.UnixMilli()/tick + 1) * tick)
}

// sessionSets groups the sessions this server tracks by expiryBucket, ids sorted (dump's
// session sets); n is the number of sessions.
func (s *Server) sessionSets() (sets map[time.Time][]encoding.SessionID, n int) {
	sessions := s.sessions.expiries()
	sets = map[time.Time][]encoding.SessionID{}
	for id, at := range sessions {
		sets[s.expiryBucket(at)] = append(sets[s.expiryBucket(at)], id)
	}
	for _, ids := range sets {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	return sets, len(sessions)
}

// expiries returns when each session this server tracks expires if its client stays silent:
// the last packet plus the timeout for a session served on a connection, the timer's deadline
// for a detached one.
func (t *sessionTable) expiries() map[encoding.SessionID]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[encoding.SessionID]time.Time, len(t.m))
	for id, rec := range t.m {
		if rec.conn != nil {
			out[id] = time.Unix(0, rec.conn.lastActivity.Load()).Add(rec.conn.timeout)
		} else {
			out[id] = rec.deadline
		}
	}
	return out
}

func sortedTimes[V any](m map[time.Time]V) []time.Time {
	ts := make([]time.Time, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

// javaDate formats t as Java's Date.toString does, in UTC: "Sat Nov 21 09:56:52 UTC 2026".
func javaDate(t time.Time) string {
	return t.UTC().Format("Mon Jan 02 15:04:05 MST 2006")
}

// round4 rounds to four decimals, as ZooKeeper rounds the averages it prints.
func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// javaDouble formats v as Java's Double.toString does for the values srvr prints: always with
// a fractional part ("0.0", "12.5").
func javaDouble(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// isro answers "ro" while the server serves read-only sessions (readonly.go), else "rw", with
// no newline, as IsroCommand: kazoo and the Java client read it to find a read-write server.
func (r *commandRun) isro() string {
	if r.s.inReadOnlyMode() {
		return "ro"
	}
	return "rw"
}

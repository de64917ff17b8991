package zetcd

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

// adminCommands are ZooKeeper 3.9's AdminServer commands (Commands), with their aliases.
// Adding a command means adding a row.
var adminCommands = []adminCommand{
	{names: []string{"configuration", "conf", "config"}, run: (*adminRun).configuration},
	{names: []string{"connection_stat_reset", "crst"}, run: (*adminRun).connectionStatReset},
	{names: []string{"connections", "cons"}, run: (*adminRun).connections},
	{names: []string{"dirs"}, run: (*adminRun).dirs},
	{names: []string{"dump"}, run: (*adminRun).dump},
	{names: []string{"environment", "env", "envi"}, run: (*adminRun).environment},
	{names: []string{"get_trace_mask", "gtmk"}, run: (*adminRun).getTraceMask},
	{names: []string{"hash"}, run: constant(field{"digests", []any{}})},
	{names: []string{"initial_configuration", "icfg"}, run: (*adminRun).initialConfiguration},
	{names: []string{"is_read_only", "isro"}, run: (*adminRun).isReadOnly},
	{names: []string{"last_snapshot", "lsnp"}, run: (*adminRun).lastSnapshot},
	{names: []string{"leader", "lead"}, run: constant(field{"error", "server is not initialized"})},
	{names: []string{"monitor", "mntr"}, run: (*adminRun).monitor},
	{names: []string{"observer_connection_stat_reset", "orst"}, run: constant()},
	{names: []string{"observers", "obsr"}, run: constant(field{"synced_observers", 0}, field{"observers", []any{}})},
	{names: []string{"restore", "rest"}, post: true, auth: true, run: disabled},
	{names: []string{"ruok"}, run: constant()},
	{names: []string{"set_trace_mask", "stmk"}, run: (*adminRun).setTraceMask},
	{names: []string{"server_stats", "srvr"}, run: (*adminRun).serverStats},
	{names: []string{"snapshot", "snap"}, auth: true, run: disabled},
	{names: []string{"stat_reset", "srst"}, run: (*adminRun).statReset},
	{names: []string{"stats", "stat"}, run: (*adminRun).stats},
	{names: []string{"system_properties", "sysp"}, run: (*adminRun).systemProperties},
	{names: []string{"voting_view"}, run: constant(field{"current_config", jsonObject{}})},
	{names: []string{"watch_summary", "wchs"}, run: (*adminRun).watchSummary},
	{names: []string{"watches", "wchc"}, run: (*adminRun).watchesBySession},
	{names: []string{"watches_by_path", "wchp"}, run: (*adminRun).watchesByPath},
	{names: []string{"zabstate"}, run: constant(field{"voting", false}, field{"zabstate", ""})},
}

// constant is a command whose answer never changes: what a standalone ZooKeeper answers for
// a command about an ensemble, a digest or a read-only mode, none of which zetcd has.
func constant(fields ...field) func(*adminRun) (int, []field) {
	return func(*adminRun) (int, []field) { return http.StatusOK, fields }
}

// disabled is snapshot's and restore's answer once authorized: ZooKeeper's when they are
// turned off (zookeeper.admin.snapshot.enabled, zookeeper.admin.restore.enabled). zetcd's
// state is etcd's, which etcd's own snapshot and restore handle (docs/operating.md).
func disabled(*adminRun) (int, []field) { return http.StatusServiceUnavailable, nil }

// notServingAnswer is the answer of a command whose figures the backend cannot give now.
func notServingAnswer() (int, []field) {
	return http.StatusServiceUnavailable, []field{{"error", strings.TrimSuffix(notServing, "\n")}}
}

func (r *adminRun) configuration() (int, []field) {
	c := r.config()
	return http.StatusOK, []field{
		{"client_port", c.clientPort},
		{"data_dir", c.dataDir},
		{"data_log_dir", c.dataLogDir},
		{"tick_time", c.tickTime},
		{"max_client_cnxns", c.maxClientCnxns},
		{"min_session_timeout", c.minSessionTimeout},
		{"max_session_timeout", c.maxSessionTimeout},
		{"server_id", 0},
		{"client_port_listen_backlog", -1},
	}
}

// initialConfiguration is the configuration as zoo.cfg would say it: ZooKeeper answers its
// configuration file's text, zetcd the same settings in zoo.cfg's keys.
func (r *adminRun) initialConfiguration() (int, []field) {
	c := r.config()
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", c.tickTime)
	fmt.Fprintf(&b, "dataDir=%s\n", c.dataDir)
	fmt.Fprintf(&b, "dataLogDir=%s\n", c.dataLogDir)
	if c.clientPort >= 0 {
		fmt.Fprintf(&b, "clientPort=%d\n", c.clientPort)
	}
	fmt.Fprintf(&b, "maxClientCnxns=%d\n", c.maxClientCnxns)
	fmt.Fprintf(&b, "minSessionTimeout=%d\n", c.minSessionTimeout)
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", c.maxSessionTimeout)
	return http.StatusOK, []field{{"initial_configuration", b.String()}}
}

func (r *adminRun) connectionStatReset() (int, []field) {
	r.s.resetConnStats()
	return http.StatusOK, nil
}

func (r *adminRun) statReset() (int, []field) {
	r.s.stats.reset()
	return http.StatusOK, nil
}

// connectionLists are the open connections' infos, plain and TLS apart, as ZooKeeper lists
// its client port's and its secure client port's.
func (r *adminRun) connectionLists(brief bool) (plain, secure []jsonObject) {
	plain, secure = []jsonObject{}, []jsonObject{}
	for _, c := range r.s.connList() {
		o := c.info(brief).json()
		if _, ok := c.nc.(*tls.Conn); ok {
			secure = append(secure, o)
		} else {
			plain = append(plain, o)
		}
	}
	return plain, secure
}

// json is the connection's info in ZooKeeper's JSON members (ServerCnxn.getConnectionInfo).
func (ci connInfo) json() jsonObject {
	o := jsonObject{
		{"remote_socket_address", ci.remote},
		{"interest_ops", ci.interest},
		{"outstanding_requests", ci.queued},
		{"packets_received", ci.received},
		{"packets_sent", ci.sent},
	}
	if !ci.session {
		return o
	}
	o = append(o,
		field{"session_id", int64(ci.id)},
		field{"last_operation", ci.lastOp},
		field{"established", ci.established},
		field{"session_timeout", ci.timeout.Milliseconds()},
	)
	if ci.lastCxid >= 0 {
		o = append(o, field{"last_cxid", ci.lastCxid})
	}
	return append(o,
		field{"last_zxid", ci.lastZxid},
		field{"last_response_time", ci.lastResp},
		field{"last_latency", ci.latLast},
		field{"min_latency", ci.latMin},
		field{"avg_latency", ci.latAvg},
		field{"max_latency", ci.latMax},
	)
}

func (r *adminRun) connections() (int, []field) {
	plain, secure := r.connectionLists(false)
	return http.StatusOK, []field{{"connections", plain}, {"secure_connections", secure}}
}

func (r *adminRun) dirs() (int, []field) {
	return http.StatusOK, []field{{"datadir_size", r.s.dataDirSize()}, {"logdir_size", r.s.logDirSize()}}
}

// dump lists the sessions this zetcd tracks by expiry time (unix ms, rounded up to the tick)
// and the ephemeral nodes of every session, as dump does.
func (r *adminRun) dump() (int, []field) {
	ts, ok := r.treeStats()
	if !ok {
		return notServingAnswer()
	}
	sets, _ := r.s.sessionSets()
	expiry := jsonObject{}
	for _, at := range sortedTimes(sets) {
		expiry = append(expiry, field{strconv.FormatInt(at.UnixMilli(), 10), sessionIDs(sets[at])})
	}
	ephemerals := jsonObject{}
	for _, id := range sortedSessions(ts.Ephemerals) {
		ephemerals = append(ephemerals, field{strconv.FormatInt(int64(id), 10), ts.Ephemerals[id]})
	}
	return http.StatusOK, []field{{"expiry_time_to_session_ids", expiry}, {"session_id_to_ephemeral_paths", ephemerals}}
}

// sessionIDs are ids as the JSON numbers ZooKeeper writes session ids as.
func sessionIDs(ids []encoding.SessionID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

func (r *adminRun) environment() (int, []field) {
	return http.StatusOK, r.s.environmentFields()
}

func (r *adminRun) getTraceMask() (int, []field) {
	return http.StatusOK, []field{{"tracemask", r.s.traceMask.Load()}}
}

// setTraceMask sets the trace mask to the traceMask query parameter, as ZooKeeper does; zetcd
// only keeps it for get_trace_mask and gtmk.
func (r *adminRun) setTraceMask() (int, []field) {
	mask, err := strconv.ParseInt(r.req.URL.Query().Get("traceMask"), 10, 64)
	if err != nil {
		return http.StatusOK, []field{{"error", "setTraceMask requires long traceMask argument"}}
	}
	r.s.traceMask.Store(mask)
	return http.StatusOK, []field{{"tracemask", mask}}
}

// lastSnapshot answers as a standalone ZooKeeper that has written only the snapshot it writes
// when it starts: zxid 0, at the time this server started (unix seconds). zetcd writes no
// snapshots of its own.
func (r *adminRun) lastSnapshot() (int, []field) {
	return http.StatusOK, []field{{"zxid", "0"}, {"timestamp", r.s.started.Unix()}}
}

// monitor is mntr's figures, then every other member of ZooKeeper's monitor
// (zooKeeperMonitorKeys) as a standalone ZooKeeper that never did that thing answers it.
func (r *adminRun) monitor() (int, []field) {
	fields, ok := r.monitorFields()
	if !ok {
		return notServingAnswer()
	}
	for _, k := range zooKeeperMonitorKeys {
		if strings.HasPrefix(k, "avg_") {
			fields = append(fields, field{k, 0.0})
		} else {
			fields = append(fields, field{k, 0})
		}
	}
	return http.StatusOK, fields
}

// serverStatsFields are server_stats' members, which stats begins with.
func (r *adminRun) serverStatsFields() ([]field, bool) {
	st, ok := r.backendStats()
	if !ok {
		return nil, false
	}
	s := r.s
	minMs, avgMs, maxMs := s.stats.latency()
	last, smallest, largest := s.stats.responseSizes()
	response := jsonObject{{"last_buffer_size", last}, {"min_buffer_size", smallest}, {"max_buffer_size", largest}}
	stats := jsonObject{
		{"packets_sent", s.stats.sent.Load()},
		{"packets_received", s.stats.received.Load()},
		{"fsync_threshold_exceed_count", 0},
		{"client_response_stats", response},
		{"data_dir_size", s.dataDirSize()},
		{"log_dir_size", s.logDirSize()},
		{"provider_null", false},
		{"last_processed_zxid", int64(st.Zxid)},
		{"outstanding_requests", s.stats.outstanding.Load()},
		{"server_state", s.serverState()},
		{"avg_latency", round4(avgMs)},
		{"max_latency", maxMs},
		{"min_latency", minMs},
		{"num_alive_client_connections", s.numConnections()},
		{"uptime", time.Since(s.started).Milliseconds()},
		{"auth_failed_count", s.stats.authFailed.Load()},
		{"non_mtlsremote_conn_count", 0},
		{"non_mtlslocal_conn_count", 0},
	}
	return []field{
		{"version", s.fullVersion()},
		{"read_only", s.inReadOnlyMode()},
		{"server_stats", stats},
		{"client_response", response},
		{"node_count", st.NodeCount},
	}, true
}

func (r *adminRun) serverStats() (int, []field) {
	fields, ok := r.serverStatsFields()
	if !ok {
		return notServingAnswer()
	}
	return http.StatusOK, fields
}

// stats is server_stats with the connections (brief).
func (r *adminRun) stats() (int, []field) {
	fields, ok := r.serverStatsFields()
	if !ok {
		return notServingAnswer()
	}
	plain, secure := r.connectionLists(true)
	return http.StatusOK, append(fields, field{"connections", plain}, field{"secure_connections", secure})
}

// systemProperties are the environment's Java system properties that describe this process
// (as envi fills them in), the separators, and AdminConfig.Properties; sorted, as ZooKeeper
// sorts them. All values are strings.
func (r *adminRun) systemProperties() (int, []field) {
	props := map[string]string{
		"file.separator": string(filepath.Separator),
		"path.separator": string(filepath.ListSeparator),
		"line.separator": "\n",
	}
	if runtime.GOOS == "windows" {
		props["line.separator"] = "\r\n"
	}
	for _, f := range r.s.environmentFields() {
		if s, ok := f.val.(string); ok && isSystemProperty(f.key) && s != "<NA>" {
			props[f.key] = s
		}
	}
	if args := os.Args; len(args) > 0 {
		props["sun.java.command"] = filepath.Base(args[0])
	}
	for k, v := range r.cfg.Properties {
		props[k] = v
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fields := make([]field, len(keys))
	for i, k := range keys {
		fields[i] = field{k, props[k]}
	}
	return http.StatusOK, fields
}

// isSystemProperty reports whether an environment key is a Java system property (the others,
// zookeeper.version, host.name and os.memory.*, are ZooKeeper's own figures).
func isSystemProperty(key string) bool {
	return (strings.HasPrefix(key, "java.") || strings.HasPrefix(key, "os.") || strings.HasPrefix(key, "user.")) &&
		!strings.HasPrefix(key, "os.memory.")
}

func (r *adminRun) watchSummary() (int, []field) {
	w := r.watches()
	return http.StatusOK, []field{
		{"num_connections", len(w.bySession)},
		{"num_paths", len(w.byPath)},
		{"num_total_watches", w.dataCount},
	}
}

func (r *adminRun) watchesBySession() (int, []field) {
	w := r.watches()
	o := jsonObject{}
	for _, id := range sortedSessions(w.bySession) {
		o = append(o, field{strconv.FormatInt(int64(id), 10), w.bySession[id]})
	}
	return http.StatusOK, []field{{"session_id_to_watched_paths", o}}
}

func (r *adminRun) watchesByPath() (int, []field) {
	w := r.watches()
	paths := make([]string, 0, len(w.byPath))
	for p := range w.byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	o := jsonObject{}
	for _, p := range paths {
		o = append(o, field{p, sessionIDs(w.byPath[p])})
	}
	return http.StatusOK, []field{{"path_to_session_ids", o}}
}

// isReadOnly is IsReadOnlyCommand's answer: whether the server serves read-only sessions now.
func (r *adminRun) isReadOnly() (int, []field) {
	return http.StatusOK, []field{{"read_only", r.s.inReadOnlyMode()}}
}

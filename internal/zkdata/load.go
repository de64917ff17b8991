package zkdata

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// progressEvery is how many nodes or transactions pass between Progress calls.
const progressEvery = 100000

// maxSnapshots is how many of the newest snapshots FileSnap.deserialize tries.
const maxSnapshots = 100

// dataFile is a snapshot or log file and the zxid in its name.
type dataFile struct {
	path string
	zxid int64
}

// zxidFromName is Util.getZxidFromName: the hex number after prefix and a dot, up to the next
// dot, or false.
func zxidFromName(name, prefix string) (int64, bool) {
	parts := strings.Split(name, ".")
	if len(parts) < 2 || parts[0] != prefix {
		return 0, false
	}
	z, err := strconv.ParseInt(parts[1], 16, 64)
	if err != nil {
		return 0, false
	}
	return z, true
}

// versionDir returns the version-2 directory of dir, which may be it.
func versionDir(dir string) (string, error) {
	if filepath.Base(dir) == "version-2" {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	v := filepath.Join(dir, "version-2")
	fi, err := os.Stat(v)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s is not a ZooKeeper data directory: no version-2 in it", dir)
		}
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a ZooKeeper data directory: %s is not a directory", dir, v)
	}
	return v, nil
}

// listFiles returns dir's files named prefix.<hex zxid>..., by zxid, oldest first.
func listFiles(dir, prefix string) ([]dataFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []dataFile
	for _, e := range entries {
		if z, ok := zxidFromName(e.Name(), prefix); ok && !e.IsDir() {
			files = append(files, dataFile{path: filepath.Join(dir, e.Name()), zxid: z})
		}
	}
	slices.SortStableFunc(files, func(a, b dataFile) int { return cmpInt64(a.zxid, b.zxid) })
	return files, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// loader holds one Load's progress.
type loader struct {
	opts     Options
	log      *zap.Logger
	progress Progress
	skipped  []string
}

func (l *loader) skip(msg string, fields ...zap.Field) {
	l.skipped = append(l.skipped, msg)
	l.log.Warn(msg, fields...)
}

func (l *loader) report() {
	if l.opts.Progress != nil {
		l.opts.Progress(l.progress)
	}
}

func (l *loader) openFile(path string) {
	l.progress.File = path
	l.progress.Files++
	l.report()
}

// Load reads the ZooKeeper data directory dir (the dataDir holding version-2, or version-2
// itself) and returns the state ZooKeeper would have after loading it: the newest valid
// snapshot, then every logged transaction after it in zxid order (FileTxnSnapLog.restore), then
// the ephemerals of sessions that are not open deleted (ZooKeeperServer.loadData).
func Load(dir string, opts Options) (*State, error) {
	l := &loader{opts: opts, log: opts.Log}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	v, err := versionDir(dir)
	if err != nil {
		return nil, err
	}
	snaps, err := listFiles(v, "snapshot")
	if err != nil {
		return nil, err
	}
	logs, err := listFiles(v, "log")
	if err != nil {
		return nil, err
	}
	if len(snaps) == 0 && len(logs) == 0 {
		return nil, fmt.Errorf("%s is not a ZooKeeper data directory: no snapshot or log in %s", dir, v)
	}
	t, snapZxid, snapPath, err := l.loadSnapshot(snaps)
	if err != nil {
		return nil, err
	}
	last, err := l.replay(t, logs, snapZxid)
	if err != nil {
		return nil, err
	}
	for _, s := range t.deadSessions(last) {
		l.skip(fmt.Sprintf("ephemerals of session %#x deleted: the session is not open", s), zap.Int64("session", s))
	}
	nodes, all, orphans, missingACL := t.state()
	for _, m := range missingACL {
		l.skip(fmt.Sprintf("node %s: its ACL is not in the snapshot's ACL cache and no setACL after it sets one; ACL left nil (ZooKeeper fails to read it)", m))
	}
	if orphans > 0 {
		l.skip(fmt.Sprintf("%d nodes left out: their parent was deleted under them, so no path from the root reaches them", orphans))
	}
	l.log.Info("loaded a ZooKeeper data directory", zap.String("dir", dir), zap.String("snapshot", snapPath),
		zap.Int("nodes", len(nodes)), zap.Int("sessions", len(t.sessions)), zap.Int64("txns", l.progress.Txns),
		zap.String("lastZxid", fmt.Sprintf("%#x", last)))
	return &State{Nodes: nodes, Sessions: t.openSessions(), LastZxid: last, Snapshot: snapPath, Skipped: l.skipped, loaded: all}, nil
}

func (t *tree) openSessions() map[int64]Session {
	out := make(map[int64]Session, len(t.sessions))
	for id, to := range t.sessions {
		out[id] = Session{ID: id, Timeout: to}
	}
	return out
}

// loadSnapshot reads the newest of the last maxSnapshots snapshots that is valid
// (FileSnap.deserialize), or returns the initial tree at zxid 0 when there is no snapshot.
func (l *loader) loadSnapshot(snaps []dataFile) (*tree, int64, string, error) {
	if len(snaps) == 0 {
		l.skip("no snapshot: the transactions apply to an empty tree")
		return initialTree(), 0, "", nil
	}
	tried := 0
	var last error
	for i := len(snaps) - 1; i >= 0 && tried < maxSnapshots; i-- {
		s := snaps[i]
		tried++
		l.openFile(s.path)
		t, err := readSnapshot(s.path, func(n int) { l.progress.Nodes = n; l.report() })
		if err == nil {
			return t, s.zxid, s.path, nil
		}
		last = fmt.Errorf("%s: %w", s.path, err)
		l.skip(fmt.Sprintf("snapshot %s skipped: %v", s.path, err), zap.String("snapshot", s.path), zap.Error(err))
	}
	return nil, 0, "", fmt.Errorf("no valid snapshot in %s (the oldest tried: %w)", filepath.Dir(snaps[0].path), last)
}

// replayLogs returns the logs FileTxnLog.read(snapZxid+1) reads: the newest that starts at or
// before snapZxid and every later one.
func replayLogs(logs []dataFile, snapZxid int64) []dataFile {
	start := 0
	for i, f := range logs {
		if f.zxid <= snapZxid {
			start = i
		}
	}
	return logs[start:]
}

// replay applies the logged transactions after snapZxid and returns the last zxid applied
// (FileTxnSnapLog.fastForwardFromEdits). Zxids must follow one another: each the one before
// plus one, or the first of a later epoch.
func (l *loader) replay(t *tree, logs []dataFile, snapZxid int64) (int64, error) {
	prev, havePrev := int64(0), false
	last := snapZxid
	for _, f := range replayLogs(logs, snapZxid) {
		l.openFile(f.path)
		lr, err := openLog(f.path)
		var torn *tornError
		if errors.As(err, &torn) {
			l.skip(fmt.Sprintf("log %s ignored: %s", f.path, torn.why), zap.String("log", f.path))
			continue
		}
		if err != nil {
			return 0, err
		}
		err = l.replayLog(t, lr, snapZxid, &prev, &havePrev, &last)
		lr.Close()
		if errors.As(err, &torn) {
			l.skip(fmt.Sprintf("log %s: last entry, at offset %d, ignored: %s (a write cut short)", f.path, torn.off, torn.why),
				zap.String("log", f.path), zap.Int64("offset", torn.off))
			continue
		}
		if err != nil {
			return 0, err
		}
	}
	return last, nil
}

// replayLog applies one log's entries after snapZxid.
func (l *loader) replayLog(t *tree, lr *logReader, snapZxid int64, prev *int64, havePrev *bool, last *int64) error {
	for {
		off, b, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		h, rec, err := decodeEntry(b)
		if err != nil {
			return fmt.Errorf("%s: offset %d: %w", lr.path, off, err)
		}
		l.progress.Txns++
		if l.progress.Txns%progressEvery == 0 {
			l.report()
		}
		ref, check := *prev, *havePrev
		if h.zxid > snapZxid && (!check || ref < snapZxid) {
			ref, check = snapZxid, true
		}
		if check && !follows(ref, h.zxid) {
			what := "after zxid"
			if ref == snapZxid && (!*havePrev || *prev < snapZxid) {
				what = "after the snapshot's zxid"
			}
			return fmt.Errorf("%s: offset %d: zxid %#x %s %#x: transactions are missing", lr.path, off, h.zxid, what, ref)
		}
		*prev, *havePrev = h.zxid, true
		if h.zxid <= snapZxid {
			continue
		}
		if err := t.processTxn(h, rec); err != nil {
			return fmt.Errorf("%s: offset %d: %w", lr.path, off, err)
		}
		*last = h.zxid
	}
}

// follows reports whether zxid may come right after prev: the next counter of the same epoch
// (the high 32 bits), or any zxid of a later epoch.
func follows(prev, zxid int64) bool {
	if zxid>>32 > prev>>32 {
		return true
	}
	return zxid == prev+1
}

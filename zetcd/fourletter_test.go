package zetcd

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

func TestParseFourLetterWords(t *testing.T) {
	for in, want := range map[string][]string{
		"":                nil,
		"ruok":            {"ruok"},
		" ruok , SRVR,, ": {"ruok", "srvr"},
		"*":               {"*"},
	} {
		got, err := ParseFourLetterWords(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ruok,nope", "stmk", "rUok2"} {
		if _, err := ParseFourLetterWords(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if w := fourLetterWhitelist([]string{"ruok"}); !w["srvr"] || !w["ruok"] || w["stat"] {
		t.Errorf("whitelist ruok: %v (srvr is always answered)", w)
	}
	if w := fourLetterWhitelist(nil); !w["mntr"] || w["wchc"] || w["dump"] {
		t.Errorf("default whitelist: %v", w)
	}
	if w := fourLetterWhitelist([]string{"*"}); len(w) != len(fourLetterCommands) {
		t.Errorf("* answers %d words, want all %d", len(w), len(fourLetterCommands))
	}
	// Every word zetcd answers is one ZooKeeper knows.
	for w := range fourLetterCommands {
		var n int32
		for _, c := range []byte(w) {
			n = n<<8 | int32(c)
		}
		if _, ok := encoding.FourLetterWord(n); !ok {
			t.Errorf("%s is not a ZooKeeper four-letter word", w)
		}
	}
	// Every opcode the server dispatches has ZooKeeper's cons name, except the two ZooKeeper
	// itself shows as "NA".
	for op := range dispatchTable {
		if na := lastOpName(op) == "NA"; na != (op == encoding.OpAuth || op == encoding.OpSasl) {
			t.Errorf("%v shows as lop=%s", op, lastOpName(op))
		}
	}
}

// TestSummarizeWatches follows ZooKeeper's two tables: wchs/wchc/wchp see the data table
// (getData, exists, persistent, recursive), zk_watch_count both tables, a persistent watch in
// each, and one watch per connection and path within a table.
func TestSummarizeWatches(t *testing.T) {
	s := summarizeWatches([]WatchInfo{
		{1, "/a", WatchData}, {1, "/a", WatchChild}, {1, "/nope", WatchExist},
		{2, "/a", WatchData},
		{3, "/p", WatchPersistent}, {3, "/r", WatchPersistentRecursive},
		{4, "/c", WatchChild},
	})
	if s.dataCount != 5 || s.total != 5+3 {
		t.Errorf("data %d total %d, want 5 and 8", s.dataCount, s.total)
	}
	if len(s.bySession) != 3 || len(s.byPath) != 4 {
		t.Errorf("sessions %v paths %v", s.bySession, s.byPath)
	}
	if !slices.Equal(s.bySession[1], []string{"/a", "/nope"}) || !slices.Equal(s.byPath["/a"], []encoding.SessionID{1, 2}) {
		t.Errorf("by session %v, by path %v", s.bySession, s.byPath)
	}
}

func TestServerJavaDouble(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 12: "12.0", 0.3123: "0.3123", 2.5: "2.5"} {
		if got := javaDouble(v); got != want {
			t.Errorf("javaDouble(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestLatencyWholeMilliseconds: request latencies are recorded in whole milliseconds, as
// ZooKeeper's ServerStats records them, so the average printed never lies outside min and max.
func TestLatencyWholeMilliseconds(t *testing.T) {
	var st serverStats
	st.latMin.Store(math.MaxInt64)
	st.observeLatency(1600 * time.Microsecond)
	st.observeLatency(1900 * time.Microsecond)
	st.observeLatency(300 * time.Microsecond)
	if minMs, avgMs, maxMs := st.latency(); minMs != 0 || avgMs != 2.0/3 || maxMs != 1 {
		t.Errorf("min/avg/max %d/%v/%d, want 0/%v/1", minMs, avgMs, maxMs, 2.0/3)
	}
}

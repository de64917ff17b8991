package embedetcd

import (
	"testing"
	"time"
)

// TestCompactionPolicy walks the policy through ticks one second apart and checks when it
// compacts, to which revision, and when it defragments.
func TestCompactionPolicy(t *testing.T) {
	const mib = 1 << 20
	const quota = 64 * mib
	p := Compaction{MaxRevisions: 1000}.withDefaults(quota, 10*time.Minute)
	if p.Interval != time.Second || p.MinRetention != 5*time.Second || p.MaxHistoryBytes != 4*mib ||
		p.PressureBytes != 32*mib || p.DefragMinBytes != 4*mib || p.Retention != 10*time.Minute {
		t.Fatalf("defaults: %+v", p)
	}
	t0 := time.Unix(1000, 0)
	var st policyState
	st.compactedAt, st.inUseAfter = t0, 1*mib
	tick := func(sec int, rev, applied, inUse int64, alarm bool) (int64, string) {
		t.Helper()
		return p.compaction(&st, observation{now: t0.Add(time.Duration(sec) * time.Second), rev: rev, applied: applied, inUse: inUse, dbSize: inUse, alarm: alarm})
	}
	compacted := func(rev int64, sec int, inUse int64) {
		st.compacted, st.compactedAt, st.inUseAfter = rev, t0.Add(time.Duration(sec)*time.Second), inUse
	}

	// Few small writes: nothing to do.
	for s := 0; s < 10; s++ {
		if rev, why := tick(s, int64(10+s), int64(10+s), 1*mib, false); rev != 0 {
			t.Fatalf("t=%d: compacted to %d (%s) with little history", s, rev, why)
		}
	}
	// 1000 revisions written, the database in use half as large again: compact up to what the
	// feed applied 5 s ago, not further.
	for s := 10; s < 20; s++ {
		rev, why := tick(s, int64(200*s), int64(200*s-50), 1*mib+mib/2, false)
		safe := int64(10 + s - 5) // what the feed had applied 5 s ago
		if s-5 >= 10 {
			safe = int64(200*(s-5) - 50)
		}
		want := int64(0)
		if safe >= 1000 {
			want = safe
		}
		if rev != want {
			t.Fatalf("t=%d: compacted to %d (%s), want %d", s, rev, why, want)
		}
		if rev != 0 {
			if why != "revisions" {
				t.Errorf("reason %q", why)
			}
			compacted(rev, s, 1*mib)
			break
		}
	}
	// Say everything seen so far was compacted: the next phases write little.
	base := st.samples[len(st.samples)-1].applied
	compacted(base, 15, 1*mib)
	// The database in use grows by MaxHistoryBytes with few revisions (large values).
	s := 20
	for ; s < 40; s++ {
		rev, why := tick(s, base+int64(s), base+int64(s), 1*mib+int64(s-20)*mib/2, false)
		if rev != 0 {
			if why != "history size" || st.inUseAfter+p.MaxHistoryBytes > 1*mib+int64(s-20)*mib/2 {
				t.Fatalf("t=%d: compacted for %q at in use %d", s, why, 1*mib+int64(s-20)*mib/2)
			}
			if rev != base+int64(s-5) {
				t.Fatalf("t=%d: compacted to %d, want %d (applied 5 s ago)", s, rev, base+int64(s-5))
			}
			compacted(rev, s, 1*mib+int64(s-20)*mib/2)
			break
		}
	}
	if s == 40 {
		t.Fatal("history grew by MaxHistoryBytes without a compaction")
	}
	// Above PressureBytes, every new revision is compacted, at most every PressureInterval.
	var at []int
	for s2 := s + 1; s2 < s+30; s2++ {
		if rev, _ := tick(s2, base+int64(s2), base+int64(s2), 40*mib, false); rev != 0 {
			at = append(at, s2)
			compacted(rev, s2, 40*mib)
		}
	}
	if len(at) < 4 || len(at) > 6 {
		t.Fatalf("under pressure compacted at %v, want every 5 s", at)
	}
	// Without new revisions the tail written before is compacted, then nothing happens.
	last := base + int64(s+29)
	for s2 := s + 30; s2 < s+50; s2++ {
		if rev, _ := p.compaction(&st, observation{now: t0.Add(time.Duration(s2) * time.Second), rev: last, applied: last, inUse: 40 * mib}); rev != 0 {
			if rev > last || st.compacted == last {
				t.Fatalf("t=%d: compacted to %d with nothing new after %d", s2, rev, st.compacted)
			}
			compacted(rev, s2, 40*mib)
		}
	}
	if st.compacted != last {
		t.Fatalf("tail compacted up to %d, want %d", st.compacted, last)
	}
	// The NOSPACE alarm compacts everything the feed applied, at once.
	if rev, why := tick(s+50, last+500, last+400, 10*mib, true); rev != last+400 || why != "NOSPACE alarm" {
		t.Fatalf("alarm: compacted to %d (%s), want %d", rev, why, last+400)
	}
	compacted(last+400, s+50, 10*mib)

	// Retention is the upper bound: a revision older than it is compacted, even when the
	// feed is stuck behind it.
	var st2 policyState
	st2.compactedAt, st2.inUseAfter = t0, mib
	p2 := Compaction{Retention: time.Minute}.withDefaults(quota, 0)
	var got int64
	for s := 0; s <= 70 && got == 0; s++ {
		got, _ = p2.compaction(&st2, observation{now: t0.Add(time.Duration(s) * time.Second), rev: int64(100 + s), applied: 50, inUse: mib, dbSize: mib})
		if got != 0 && (s < 60 || got != 100) {
			t.Fatalf("t=%d: retention compacted to %d, want 100 at t=60", s, got)
		}
	}
	if got != 100 {
		t.Fatal("no compaction after Retention")
	}
	if n := len(st2.samples); n > 62 {
		t.Errorf("%d samples kept for a 1 min retention at 1/s", n)
	}
}

func TestDefragPolicy(t *testing.T) {
	const mib = 1 << 20
	const quota = 64 * mib
	p := Compaction{}.withDefaults(quota, time.Minute)
	t0 := time.Unix(1000, 0)
	st := policyState{defragAt: t0}
	for _, tc := range []struct {
		sec           int
		dbSize, inUse int64
		alarm         bool
		want          bool
	}{
		{10, 2 * mib, 0, false, false},          // small file
		{10, 16 * mib, 12 * mib, false, false},  // mostly in use
		{10, 16 * mib, 6 * mib, false, false},   // mostly free, but defragmented 10 s ago
		{70, 16 * mib, 6 * mib, false, true},    // ... a minute ago
		{10, 50 * mib, 20 * mib, false, true},   // near the quota, much free: after PressureInterval
		{3, 50 * mib, 45 * mib, false, false},   // ... not before
		{10, 50 * mib, 45 * mib, false, true},   // a sixteenth of the quota free is enough
		{10, 50 * mib, 48 * mib, false, false},  // less is not
		{10, 16 * mib, 12 * mib, true, true},    // NOSPACE alarm: after PressureInterval
		{3, 16 * mib, 12 * mib, true, false},    // ... not before, with no compaction since
		{70, 16 * mib, 8*mib + 1, false, false}, // not half free
	} {
		o := observation{now: t0.Add(time.Duration(tc.sec) * time.Second), dbSize: tc.dbSize, inUse: tc.inUse, alarm: tc.alarm}
		if got := p.defrag(&st, o, quota); got != tc.want {
			t.Errorf("%+v: defrag %v", tc, got)
		}
	}
	// Under the alarm, after a compaction at once.
	st.compactedAt = t0.Add(time.Second)
	if !p.defrag(&st, observation{now: t0.Add(time.Second), dbSize: 16 * mib, inUse: 12 * mib, alarm: true}, quota) {
		t.Error("no defragmentation after a compaction under the NOSPACE alarm")
	}
	if !disarm(60*mib, quota) || disarm(61*mib, quota) {
		t.Error("disarm: want a sixteenth of the quota free")
	}
}

// TestCompactionPolicyPressure: zetcd's data near its limit (a limit far below PressureBytes)
// compacts every new revision at most every PressureInterval, so that deleted data frees room.
func TestCompactionPolicyPressure(t *testing.T) {
	const mib = 1 << 20
	p := Compaction{}.withDefaults(64*mib, 10*time.Minute)
	t0 := time.Unix(1000, 0)
	st := policyState{compactedAt: t0, inUseAfter: mib}
	var at []int
	for s := 0; s < 30; s++ {
		o := observation{now: t0.Add(time.Duration(s) * time.Second), rev: int64(100 + s), applied: int64(100 + s), inUse: 2 * mib, dbSize: 2 * mib, pressure: s >= 10}
		if rev, why := p.compaction(&st, o); rev != 0 {
			if why != "size in use" || s < 10 {
				t.Fatalf("t=%d: compacted to %d for %q", s, rev, why)
			}
			at = append(at, s)
			st.compacted, st.compactedAt = rev, o.now
		}
	}
	if len(at) < 3 || len(at) > 5 {
		t.Errorf("under pressure compacted at %v, want every 5 s from t=10", at)
	}
}

// TestCompactionPolicyLargeTree: on a large database, MaxRevisions revisions alone do not
// compact (etcd's compaction reads the whole database): history must also have grown by
// MinHistoryShare of what was in use after the last compaction. On a small one the
// revisions suffice.
func TestCompactionPolicyLargeTree(t *testing.T) {
	const mib = 1 << 20
	p := Compaction{}.withDefaults(8<<30, 10*time.Minute) // MaxHistoryBytes 512 MiB: out of the way
	if p.MinHistoryShare != 0.25 {
		t.Fatalf("MinHistoryShare default %v", p.MinHistoryShare)
	}
	t0 := time.Unix(1000, 0)
	// 500 revisions a second of 300 bytes each (150 KB/s), from in use inUseAfter.
	run := func(inUseAfter int64, p Compaction) (at int, reason string) {
		st := policyState{compactedAt: t0, inUseAfter: inUseAfter}
		for s := 0; s < 1000; s++ {
			rev := int64(500 * s)
			o := observation{now: t0.Add(time.Duration(s) * time.Second), rev: rev, applied: rev, inUse: inUseAfter + 300*rev}
			o.dbSize = o.inUse
			if got, why := p.compaction(&st, o); got != 0 {
				return s, why
			}
		}
		return -1, ""
	}
	// Small: 10,000 revisions applied 5 s before, at t=25.
	if at, why := run(mib, p); at != 25 || why != "revisions" {
		t.Errorf("1 MiB in use: compacted at t=%d (%q), want t=25 for revisions", at, why)
	}
	// Large: history of 50 MiB (a quarter of 200 MiB) takes about 350 s to write.
	at, why := run(200*mib, p)
	if why != "revisions" || at < 345 || at > 360 {
		t.Errorf("200 MiB in use: compacted at t=%d (%q), want about t=350 for revisions", at, why)
	}
	// A negative share: revisions alone, as on a small database.
	p.MinHistoryShare = -1
	if at, why := run(200*mib, p); at != 25 || why != "revisions" {
		t.Errorf("share off, 200 MiB in use: compacted at t=%d (%q), want t=25", at, why)
	}
}

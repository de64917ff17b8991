package embedetcd

import "time"

// Compaction is the embedded etcd's history and space policy, run by its compactor
// (compactor.go). etcd's own auto-compactor has one mode, time or revisions; zetcd needs both,
// plus size, and must never compact history its watch feed has not applied yet.
//
// Every Interval the compactor reads etcd's status (revision, database size and size in use,
// alarms) and the revision the watch feed has applied, and compacts:
//   - history older than Retention, always (the upper bound of history kept);
//   - up to what the feed applied MinRetention ago, once MaxRevisions revisions were written
//     since the last compaction and the database in use grew by MinHistoryShare of what it
//     held after it, or the database in use grew by MaxHistoryBytes since then, or it is above
//     PressureBytes or zetcd's data near its limit (then at most every PressureInterval);
//   - up to what the feed has applied, at once, when etcd's NOSPACE alarm is raised.
//
// MinHistoryShare makes the revisions rule wait until history is worth what a compaction
// costs: etcd's compaction reads every key up to the revision it compacts to, live or not,
// committing its backend (a disk sync, writes held meanwhile) every 1,000 keys. On a tree of
// 500,000 keys each compaction takes about 7 s, so one per 10,000 revisions would keep etcd
// compacting a third of the time at 500 writes a second, each one freeing little.
//
// It defragments when at least half of the file is free and the file is at least
// DefragMinBytes, at most every DefragInterval; when the file has grown past three quarters of
// the quota with a sixteenth of the quota free, at most every PressureInterval; with the
// NOSPACE alarm after every compaction, else at most every PressureInterval, and then disarms
// the alarm once the file is well below the quota.
//
// Zero fields take the defaults below; quota-relative ones scale with the quota.
type Compaction struct {
	Interval         time.Duration // 1s
	Retention        time.Duration // Config.CompactionRetention (10m)
	MinRetention     time.Duration // 5s: reads at a fixed revision (paged scans) finish within it
	MaxRevisions     int64         // 10,000
	MinHistoryShare  float64       // 0.25; negative: none
	MaxHistoryBytes  int64         // quota/16
	PressureBytes    int64         // quota/2
	PressureInterval time.Duration // 5s
	DefragMinBytes   int64         // quota/16
	DefragInterval   time.Duration // 1m
}

// withDefaults fills the zero fields for a quota of quota bytes and the given retention.
func (c Compaction) withDefaults(quota int64, retention time.Duration) Compaction {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defD(&c.Interval, time.Second)
	defD(&c.Retention, retention)
	defD(&c.MinRetention, 5*time.Second)
	def(&c.MaxRevisions, 10000)
	if c.MinHistoryShare == 0 {
		c.MinHistoryShare = 0.25
	}
	def(&c.MaxHistoryBytes, quota/16)
	def(&c.PressureBytes, quota/2)
	defD(&c.PressureInterval, 5*time.Second)
	def(&c.DefragMinBytes, quota/16)
	defD(&c.DefragInterval, time.Minute)
	return c
}

// observation is what the compactor sees at one tick.
type observation struct {
	now     time.Time
	rev     int64 // etcd's current revision
	applied int64 // the newest revision the watch feed has applied (<= rev)
	dbSize  int64 // the database file (what etcd's quota counts)
	inUse   int64 // of which in use (the rest is free pages)
	alarm   bool  // etcd's NOSPACE alarm is raised
	// pressure says zetcd's data is near its limit (CompactorConfig.Pressure): deleted data
	// frees room only once compacted.
	pressure bool
}

// sample is the revisions seen at one tick, kept for Retention.
type sample struct {
	at           time.Time
	rev, applied int64
}

// policyState is what the policy remembers between ticks. Only the compactor goroutine uses it.
type policyState struct {
	compacted   int64     // the revision of the last compaction (0: none yet)
	compactedAt time.Time // when it ran
	inUseAfter  int64     // database in use right after it
	defragAt    time.Time // the last defragmentation
	samples     []sample  // oldest first; one older than Retention at most
}

// compaction decides the revision to compact to at this tick (0: none) and why.
func (p Compaction) compaction(st *policyState, o observation) (rev int64, reason string) {
	st.samples = append(st.samples, sample{at: o.now, rev: o.rev, applied: o.applied})
	// Keep the newest sample at least Retention old, and everything after it.
	for len(st.samples) > 1 && !st.samples[1].at.After(o.now.Add(-p.Retention)) {
		st.samples = st.samples[1:]
	}
	if o.alarm && o.applied > st.compacted {
		return o.applied, "NOSPACE alarm"
	}
	// The time bound: etcd's revision of Retention ago, whatever the feed has applied (a feed
	// that far behind resynchronises).
	if old := st.samples[0]; !old.at.After(o.now.Add(-p.Retention)) && old.rev > st.compacted {
		rev, reason = old.rev, "retention"
	}
	// What the feed applied MinRetention ago: the newest history the other rules compact.
	var safe int64
	for _, s := range st.samples {
		if s.at.After(o.now.Add(-p.MinRetention)) {
			break
		}
		safe = s.applied
	}
	if safe <= st.compacted || safe <= rev {
		return rev, reason
	}
	switch {
	case safe-st.compacted >= p.MaxRevisions && float64(o.inUse-st.inUseAfter) >= p.MinHistoryShare*float64(st.inUseAfter):
		return safe, "revisions"
	case o.inUse-st.inUseAfter >= p.MaxHistoryBytes:
		return safe, "history size"
	case (o.inUse >= p.PressureBytes || o.pressure) && o.now.Sub(st.compactedAt) >= p.PressureInterval:
		return safe, "size in use"
	}
	return rev, reason
}

// defrag decides whether to defragment now, after the compaction of this tick (o is the
// status after it), for a quota of quota bytes.
func (p Compaction) defrag(st *policyState, o observation, quota int64) bool {
	since := o.now.Sub(st.defragAt)
	switch {
	case o.alarm:
		// After a compaction; else, as the alarm outlasts a defragmentation that could not
		// free enough to disarm it (the data itself fills the quota), not back to back: etcd
		// serves nothing while it defragments.
		return st.compactedAt.After(st.defragAt) || since >= p.PressureInterval
	case o.dbSize >= quota*3/4 && o.dbSize-o.inUse >= quota/16:
		// Near the quota with a sixteenth of it to gain: history and fragmentation are
		// outgrowing the data.
		return since >= p.PressureInterval
	case o.dbSize < p.DefragMinBytes || o.inUse*2 > o.dbSize:
		return false
	}
	return since >= p.DefragInterval
}

// disarm says whether a NOSPACE alarm may be disarmed with the file at dbSize: at least a
// sixteenth of the quota is free again, so that writes do not raise it again at once.
func disarm(dbSize, quota int64) bool { return dbSize <= quota-quota/16 }

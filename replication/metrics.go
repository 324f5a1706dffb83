package replication

import (
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/histogram"
	"github.com/lockserver/lockserver/replication/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// raftMetrics are the figures a member counts as it works, for its
// Collector; raft's own state (term, indexes) is read when collected.
type raftMetrics struct {
	leaderChanges atomic.Int64
	// commit and apply time this node's proposals from when they were
	// proposed to when the entry holding them was committed (handed to the
	// state machine) and applied; batch counts the proposals of each entry.
	commit, apply histogram.Histogram
	batch         histogram.Histogram
	// logWrite times each write of the log to disk (one write and one
	// fdatasync of the journal; a bolt commit without a data directory's
	// journal).
	logWrite histogram.Histogram
	// snapshots: how many this node took, how long each took to write, and
	// the size of the last.
	snapshots     atomic.Int64
	snapshotTime  histogram.Histogram
	snapshotBytes atomic.Int64
	// restores count the snapshots this node's state was replaced with, its
	// own at start and those a leader installed, and restoreTime times
	// reading each.
	restoresAtStart, installs atomic.Int64
	restoreTime               histogram.Histogram
	// forwarded counts the requests a follower sent to the leader, forward
	// times each batch's round trip, and unknown counts the forwarded writes
	// whose outcome the follower could not learn (answered UNKNOWN).
	forwarded atomic.Int64
	forward   histogram.Histogram
	unknown   atomic.Int64
}

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("lockserver_raft_"+name, help, labels, nil)
}

var (
	descState      = newDesc("state", "1 for the member's Raft state (leader, follower, candidate, shutdown), 0 for the others.", "state")
	descHasLeader  = newDesc("has_leader", "1 when the member knows a leader.")
	descReady      = newDesc("ready", "1 when the member is ready for clients (see /readyz): it knows a leader and has applied every entry committed.")
	descTerm       = newDesc("term", "The member's current term.")
	descLastIndex  = newDesc("last_log_index", "Index of the last entry in the member's log.")
	descCommit     = newDesc("commit_index", "Index of the last entry the member knows to be committed.")
	descApplied    = newDesc("applied_index", "Index of the last entry the member's state machine applied.")
	descChanges    = newDesc("leader_changes_total", "Changes of leader this member observed (a new leader, or none).")
	descCommitTime = newDesc("proposal_commit_seconds", "Time from this member proposing a write (as leader) to its entry being committed.")
	descApplyTime  = newDesc("proposal_apply_seconds", "Time from this member proposing a write (as leader) to its entry being applied and the client answered.")
	descBatch      = newDesc("batch_proposals", "Proposals in each log entry this member proposed: the writes that share one commit.")
	descLogWrite   = newDesc("log_write_seconds", "Time to write entries to the member's log on disk (one write and one fdatasync).")
	descLogBytes   = newDesc("log_file_bytes", "Size of the member's log files: the journal (raft.journal) and the bolt log (raft.db).", "file")
	descSnapshots  = newDesc("snapshots_total", "Snapshots this member took.")
	descSnapTime   = newDesc("snapshot_seconds", "Time to take and write a snapshot.")
	descSnapBytes  = newDesc("snapshot_bytes", "Size of the last snapshot this member took.")
	descRestores   = newDesc("snapshot_restores_total", "Snapshots this member's state was restored from: its own at start (source start), or one a leader installed (source leader).", "source")
	descRestore    = newDesc("snapshot_restore_seconds", "Time to read a snapshot into the state machine.")
	descForwarded  = newDesc("forwarded_requests_total", "Requests this member, as a follower, forwarded to the leader.")
	descForward    = newDesc("forward_seconds", "Round trip of a batch of requests forwarded to the leader.")
	descUnknown    = newDesc("forwarded_unknown_total", "Forwarded writes answered UNKNOWN: the leader changed or the connection broke after they were sent.")
	descLag        = newDesc("follower_lag_entries", "On the leader: entries each other member has yet to apply (the leader's last log index less the member's applied index).", "member")
	descReachable  = newDesc("follower_reachable", "On the leader: 1 when the member answered the leader's last question of its applied index.", "member")
)

// Bounds of the histograms as exposed: powers of two, in nanoseconds for
// times (about 1 us to 34 s) and in proposals for batches (1 to 1024).
var (
	timeBounds  = histogram.PowersOfTwo(10, 35)
	batchBounds = histogram.PowersOfTwo(0, 10)
)

// Collector returns the member's Raft metrics as a Prometheus collector.
func (r *Raft) Collector() prometheus.Collector { return raftCollector{r} }

type raftCollector struct{ r *Raft }

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descHasLeader, descReady, descTerm, descLastIndex, descCommit,
		descApplied, descChanges, descCommitTime, descApplyTime, descBatch, descLogWrite, descLogBytes,
		descSnapshots, descSnapTime, descSnapBytes, descRestores, descRestore, descForwarded, descForward, descUnknown, descLag, descReachable} {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	r, m := c.r, &c.r.metrics
	value := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	hist := func(d *prometheus.Desc, h *histogram.Histogram, bounds []int64, scale float64) {
		s := h.Snapshot()
		cum := s.Cumulative(bounds)
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[float64(b)*scale] = cum[i]
		}
		ch <- prometheus.MustNewConstHistogram(d, s.Count, float64(s.Sum)*scale, buckets)
	}
	state := r.raft.State()
	for _, s := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
		v := 0.0
		if s == state {
			v = 1
		}
		value(descState, prometheus.GaugeValue, v, lowerState(s))
	}
	bool01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	value(descHasLeader, prometheus.GaugeValue, bool01(r.leaderID() != ""))
	value(descReady, prometheus.GaugeValue, bool01(r.readyNow() == nil))
	value(descTerm, prometheus.GaugeValue, float64(r.raft.CurrentTerm()))
	last := r.raft.LastIndex()
	value(descLastIndex, prometheus.GaugeValue, float64(last))
	value(descCommit, prometheus.GaugeValue, float64(r.raft.CommitIndex()))
	value(descApplied, prometheus.GaugeValue, float64(r.applied.Load()))
	value(descChanges, prometheus.CounterValue, float64(m.leaderChanges.Load()))
	hist(descCommitTime, &m.commit, timeBounds, 1e-9)
	hist(descApplyTime, &m.apply, timeBounds, 1e-9)
	hist(descBatch, &m.batch, batchBounds, 1)
	hist(descLogWrite, &m.logWrite, timeBounds, 1e-9)
	if dir := r.opts.DataDir; dir != "" {
		for _, f := range []struct{ label, name string }{{"journal", storage.JournalFile}, {"bolt", storage.BoltFile}} {
			if st, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
				value(descLogBytes, prometheus.GaugeValue, float64(st.Size()), f.label)
			}
		}
	}
	value(descSnapshots, prometheus.CounterValue, float64(m.snapshots.Load()))
	hist(descSnapTime, &m.snapshotTime, timeBounds, 1e-9)
	value(descSnapBytes, prometheus.GaugeValue, float64(m.snapshotBytes.Load()))
	value(descRestores, prometheus.CounterValue, float64(m.restoresAtStart.Load()), "start")
	value(descRestores, prometheus.CounterValue, float64(m.installs.Load()), "leader")
	hist(descRestore, &m.restoreTime, timeBounds, 1e-9)
	value(descForwarded, prometheus.CounterValue, float64(m.forwarded.Load()))
	hist(descForward, &m.forward, timeBounds, 1e-9)
	value(descUnknown, prometheus.CounterValue, float64(m.unknown.Load()))
	if state == raft.Leader {
		for id, applied := range r.followerApplied() {
			if applied < 0 {
				value(descReachable, prometheus.GaugeValue, 0, id)
				continue
			}
			value(descReachable, prometheus.GaugeValue, 1, id)
			value(descLag, prometheus.GaugeValue, float64(max(int64(last)-applied, 0)), id)
		}
	}
}

func lowerState(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// followerApplied asks every other member for its applied index, at once,
// and returns them by member id; -1 for a member that did not answer.
func (r *Raft) followerApplied() map[string]int64 {
	cf := r.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	type answer struct {
		id      string
		applied int64
	}
	answers := make(chan answer)
	n := 0
	for _, s := range cf.Configuration().Servers {
		id, addr := string(s.ID), string(s.Address)
		if id == r.opts.NodeID {
			continue
		}
		n++
		go func() {
			a := answer{id, -1}
			if v, err := r.memberApplied(replicaMember{id: id, addr: addr}); err == nil {
				a.applied = int64(v)
			}
			answers <- a
		}()
	}
	out := make(map[string]int64, n)
	for range n {
		a := <-answers
		out[a.id] = a.applied
	}
	return out
}

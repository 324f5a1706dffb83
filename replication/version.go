package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// The cluster version is the lowest MAJOR.MINOR that every voter runs, as
// the log last recorded it: what the members may write. A format that a
// release adds (a log entry kind, a field, a snapshot form, a message) is
// written only once the cluster version is at least that release's, so that
// every member can read it; until then a member writes the forms of the
// cluster's version, which every voter reads. A log that has recorded none,
// one that lockserver 0.1 wrote, is at buildinfo.Oldest.
//
// The leader raises it (raiseClusterVersion) once it knows that every voter
// runs a later release: what each one said in its last member link
// handshake. It never lowers it by itself. An operator lowers it to roll a
// cluster back (LOCKSERVER DOWNGRADE): the lowered version is pinned, and
// the leader raises it no more until the operator cancels. Each member takes
// a snapshot when the version is lowered, so that its latest is of a form
// the older release reads.
//
// A member whose build is older than the cluster version the log records,
// or that meets an entry it cannot decode, is too old to be a member: it
// stops (see halt) and applies nothing past the entry.

// clusterVersion is the cluster version a state machine has applied.
type clusterVersion struct {
	version buildinfo.Release // zero: none recorded, buildinfo.Oldest
	pinned  bool              // set by an operator: the leader does not raise it
}

// get returns the cluster version, buildinfo.Oldest if none was recorded.
func (v clusterVersion) get() buildinfo.Release {
	if v.version == (buildinfo.Release{}) {
		return buildinfo.Oldest
	}
	return v.version
}

// allows reports whether the cluster version lets a member write the forms
// that release added.
func (v clusterVersion) allows(release buildinfo.Release) bool { return !v.get().Less(release) }

// applyClusterVersion applies a KindClusterVersion entry of the log entry
// at index. smMu is held.
func (r *Raft) applyClusterVersion(index uint64, e *logcodec.LogEntry) {
	v, err := buildinfo.Parse(e.Version)
	if err != nil {
		r.halt(index, fmt.Errorf("cluster version entry: %w", err))
		return
	}
	if r.build.Less(v) {
		r.halt(index, fmt.Errorf("the cluster runs lockserver %s and this member %s: it is too old to be a member; run %s or later", v, r.opts.build, v))
		return
	}
	sm := r.sm.Load()
	lowered := v.Less(sm.cluster.get())
	sm.setCluster(clusterVersion{version: v, pinned: e.Pinned})
	r.log.Info("cluster version", "event", "cluster_version", "version", v.String(), "pinned", e.Pinned, "index", index)
	if lowered && index > r.replayUntil {
		// The latest snapshot must be of a form the older release reads.
		go func() {
			if err := r.takeSnapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
				r.log.Warn("snapshot after a downgrade failed", "err", err)
			}
		}()
	}
}

// halt stops a member that cannot apply the log entry at index: it is too
// old to be a member, or the entry is damaged. It applies nothing from then
// on, takes no snapshot (raft counts the entry applied), and stops; the
// process that runs it should exit, to be run again with a build that reads
// the log. smMu is held.
func (r *Raft) halt(index uint64, err error) {
	err = fmt.Errorf("log entry %d: %w", index, err)
	if !r.halted.CompareAndSwap(nil, &err) {
		return
	}
	r.log.Error("stopping: this member cannot apply the log", "event", "halt", "index", index, "err", err)
	r.logFailed(err)
}

// undecodable is the error of a log entry that this build cannot decode:
// written by a later release, since one that wrote it knew the cluster's
// version allowed it, or damaged.
func (r *Raft) undecodable(err error) error {
	return fmt.Errorf("this build (lockserver %s) cannot decode it: a later release wrote it, or it is damaged (the cluster version is %s): %w",
		r.opts.build, r.sm.Load().cluster.get(), err)
}

// cannotApply returns why this member applies no more entries: its log
// could not be written, or it met an entry it cannot apply; nil if it can.
func (r *Raft) cannotApply() error {
	if err := r.logs.Failure(); err != nil {
		return err
	}
	if err := r.halted.Load(); err != nil {
		return *err
	}
	return nil
}

// raiseClusterVersion proposes a higher cluster version, on the leader,
// once every voter is known to run a later release than the log records,
// unless an operator pinned it.
func (r *Raft) raiseClusterVersion() {
	r.smMu.Lock()
	cur := r.sm.Load().cluster
	r.smMu.Unlock()
	if cur.pinned {
		return
	}
	lowest, ok := r.votersLowestBuild()
	if !ok || !cur.get().Less(lowest) {
		return
	}
	if err := r.proposeClusterVersion(lowest, false); err != nil {
		r.log.Warn("raising the cluster version failed", "version", lowest.String(), "err", err)
	}
}

// votersLowestBuild returns the lowest release the voters run, as their
// last link handshakes with this member said; false if it does not know
// one voter's.
func (r *Raft) votersLowestBuild() (buildinfo.Release, bool) {
	cf := r.raft.GetConfiguration()
	if cf.Error() != nil {
		return buildinfo.Release{}, false
	}
	builds := r.peerBuilds()
	lowest := r.build
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == r.opts.NodeID {
			continue
		}
		v, err := buildinfo.Parse(builds[string(s.ID)])
		if err != nil {
			return buildinfo.Release{}, false
		}
		if v.Less(lowest) {
			lowest = v
		}
	}
	return lowest, true
}

// proposeClusterVersion proposes a KindClusterVersion entry, alone in its
// Raft log entry (see logcodec.KindClusterVersion), and waits until it is
// applied.
func (r *Raft) proposeClusterVersion(v buildinfo.Release, pinned bool) error {
	ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
	defer cancel()
	return r.proposeWait(ctx, &logcodec.LogEntry{Kind: logcodec.KindClusterVersion, Version: v.String(), Pinned: pinned})
}

// downgrade serves LOCKSERVER DOWNGRADE version|CANCEL on the leader: it
// lowers the cluster version to version, one release below it and not below
// the oldest this build speaks, and pins it; CANCEL unpins it, and the
// leader raises it again once every voter runs a later release.
func (r *Raft) downgrade(arg string) error {
	r.smMu.Lock()
	cur := r.sm.Load().cluster
	r.smMu.Unlock()
	if strings.EqualFold(arg, "cancel") {
		if !cur.pinned {
			return keyspace.Error("ERR no downgrade to cancel").Err()
		}
		return r.proposeClusterVersion(cur.get(), false)
	}
	v, err := buildinfo.Parse(arg)
	switch {
	case err != nil:
		return keyspace.Error("ERR " + err.Error()).Err()
	case v.Less(buildinfo.Oldest):
		return keyspace.Error(fmt.Sprintf("ERR this build reads no cluster version below %s", buildinfo.Oldest)).Err()
	case !v.Less(cur.get()):
		return keyspace.Error(fmt.Sprintf("ERR the cluster version is %s: a downgrade lowers it", cur.get())).Err()
	}
	return r.proposeClusterVersion(v, true)
}

// peerBuilds returns the build version of each member, by node id, as this
// member last heard it.
func (r *Raft) peerBuilds() map[string]string {
	if r.opts.peerBuilds != nil {
		return r.opts.peerBuilds()
	}
	if r.link == nil {
		return nil
	}
	return r.link.Builds()
}

package replication

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// DataDirInfo describes a stopped member's data directory, as
// InspectDataDir read it.
type DataDirInfo struct {
	Cluster string
	// LastIndex and LastTerm are of the last entry in the log (the newest
	// snapshot's when the log is empty): of survivors, the one whose
	// (LastTerm, LastIndex) is highest holds the most, as raft's elections
	// compare them. CurrentTerm is the term the member last knew.
	LastIndex, LastTerm, CurrentTerm uint64
	// SnapshotIndex is the index the newest snapshot holds: the member has
	// applied that much at least, and a restart applies the committed
	// entries of its log after it.
	SnapshotIndex uint64
	// Members are the voters and non-voters of the last configuration the
	// member holds, committed or not.
	Members []DirMember
}

// A DirMember is a member a data directory's configuration names.
type DirMember struct {
	ID, RaftAddr string
	Voter        bool
}

// InspectDataDir reads the data directory of a stopped member, with the
// integrity checks a start makes, and describes it.
func InspectDataDir(dir string) (DataDirInfo, error) {
	if err := memberData(dir); err != nil {
		return DataDirInfo{}, err
	}
	r, err := offline("inspect")
	if err != nil {
		return DataDirInfo{}, err
	}
	var info DataDirInfo
	err = withDir(dir, r, func(d *storage.Dir) error {
		var err error
		info, err = inspect(d)
		return err
	})
	return info, err
}

func inspect(d *storage.Dir) (DataDirInfo, error) {
	var info DataDirInfo
	id, err := d.StableStore.Get(keyClusterID)
	if err == nil && len(id) == len(memberlink.ClusterID{}) {
		info.Cluster = memberlink.ClusterID(id).String()
	}
	if info.CurrentTerm, err = d.StableStore.GetUint64(keyCurrentTerm); err != nil && err.Error() != "not found" {
		return info, err
	}
	var conf raft.Configuration
	metas, err := d.SnapshotStore.List()
	if err != nil {
		return info, err
	}
	if len(metas) > 0 {
		info.SnapshotIndex, info.LastIndex, info.LastTerm = metas[0].Index, metas[0].Index, metas[0].Term
		conf = metas[0].Configuration
	}
	first, err := d.LogStore.FirstIndex()
	if err != nil {
		return info, err
	}
	last, err := d.LogStore.LastIndex()
	if err != nil {
		return info, err
	}
	for i := max(first, info.SnapshotIndex+1); last > 0 && i <= last; i++ {
		var l raft.Log
		if err := d.LogStore.GetLog(i, &l); err != nil {
			return info, fmt.Errorf("log entry %d: %w", i, err)
		}
		info.LastIndex, info.LastTerm = l.Index, l.Term
		if l.Type == raft.LogConfiguration {
			conf = raft.DecodeConfiguration(l.Data)
		}
	}
	for _, s := range conf.Servers {
		info.Members = append(info.Members, DirMember{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return info, nil
}

// memberData refuses a directory that holds no member's data, which
// opening it would create.
func memberData(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, storage.BoltFile)); err != nil {
		return fmt.Errorf("%s holds no member's data: %w", dir, err)
	}
	return nil
}

// RecoverOptions say which stopped member recovers, and where it is
// reached once it runs again.
type RecoverOptions struct {
	DataDir, NodeID string
	// RaftAddr is where the other members reach this one's Raft transport
	// (its advertise address, when it has one).
	RaftAddr string
}

// Recover makes a stopped member, whose cluster lost a majority for good,
// the one voter of a new cluster with its state: every entry its log holds,
// committed or not, is applied (raft's RecoverCluster), and what it never
// had is lost. The new cluster has a new identity, so that the members of
// the old one are refused, and the next epoch, so that the fencing tokens it
// issues exceed every one the old cluster issued, those the member never
// heard of included (see package lock). Other members then join it with no
// data. It returns the directory as it was before.
func Recover(o RecoverOptions) (DataDirInfo, error) {
	if o.NodeID == "" || o.RaftAddr == "" {
		return DataDirInfo{}, errors.New("recover: the member's id and Raft address are required")
	}
	if err := memberData(o.DataDir); err != nil {
		return DataDirInfo{}, err
	}
	r, err := newEngine(RaftOptions{NodeID: o.NodeID, RaftAddr: o.RaftAddr, DataDir: o.DataDir})
	if err != nil {
		return DataDirInfo{}, err
	}
	r.recovering = true
	var before DataDirInfo
	err = withDir(o.DataDir, r, func(d *storage.Dir) error {
		if before, err = inspect(d); err != nil {
			return err
		}
		if before.Cluster == "" {
			return errors.New("the directory holds no member's state")
		}
		ls, err := storage.NewLog(d.LogStore, func() bool { return false }, r.logFailed, &r.metrics.logWrite)
		if err != nil {
			return err
		}
		r.logs = ls
		conf := r.raftConfig(newHCLogger(r.log))
		_, trans := raft.NewInmemTransport(raft.ServerAddress(o.RaftAddr))
		voters := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(o.NodeID), Address: raft.ServerAddress(o.RaftAddr)}}}
		err = raft.RecoverCluster(conf, (*fsm)(r), ls, d.StableStore, d.SnapshotStore, trans, voters)
		if err == nil {
			id := randomClusterID()
			err = d.StableStore.Set(keyClusterID, id[:])
		}
		return errors.Join(err, ls.Close())
	})
	if err != nil {
		return before, fmt.Errorf("recover %s: %w", o.DataDir, err)
	}
	return before, nil
}

// recoverSnapshot readies the state for the snapshot RecoverCluster takes:
// the next epoch, this build's cluster version, and this member alone. smMu
// is held.
func (r *Raft) recoverSnapshot() {
	r.sm.Load().newCluster(r.build)
	own := map[string]string{}
	if addr, ok := (*r.members.Load())[r.opts.NodeID]; ok {
		own[r.opts.NodeID] = addr
	}
	r.members.Store(&own)
}

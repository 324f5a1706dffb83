package replication

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/backupfile"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
	"github.com/lockserver/lockserver/replication/internal/storage"
	"github.com/redis/go-redis/v9"
)

// BackupInfo describes a backup file, checked whole.
type BackupInfo struct {
	// Cluster is the identity of the cluster the backup came from; Index the
	// applied index its state holds, Term the leader's term then, Created
	// when it began (the leader's clock).
	Cluster     string
	Index, Term uint64
	Created     time.Time
	// Bytes is the body's length and SHA256 its hash, which the file's
	// header holds and which were checked.
	Bytes  uint64
	SHA256 string
	// Epoch is the epoch of the state (see lock's tokens); ClusterVersion
	// the cluster version it recorded.
	Epoch          uint64
	ClusterVersion string
	// Keys counts the keys in every database, and Leases those of them with
	// a deadline: a lock is such a key.
	Keys, Leases int
}

// SaveBackup takes a backup of the cluster of the member at addr, from its
// leader, and writes it to the file path, created whole or not at all. dial
// returns a client of the member at a client address; progress, when set,
// is told the bytes received so far after each piece.
func SaveBackup(ctx context.Context, addr string, dial func(addr string) *redis.Client, path string, progress func(uint64)) (BackupInfo, error) {
	c, v, err := beginBackup(ctx, addr, dial)
	if err != nil {
		return BackupInfo{}, err
	}
	defer c.Close()
	m := replyMap(v)
	id := m["id"]
	index, err1 := strconv.ParseUint(m["index"], 10, 64)
	term, err2 := strconv.ParseUint(m["term"], 10, 64)
	created, err3 := strconv.ParseInt(m["created"], 10, 64)
	cluster, err4 := memberlink.ParseClusterID(m["cluster"])
	if err := errors.Join(err1, err2, err3, err4); err != nil || id == "" {
		return BackupInfo{}, fmt.Errorf("begin the backup: the leader replied %v (%v)", v, err)
	}
	w, err := backupfile.Create(path)
	if err != nil {
		return BackupInfo{}, err
	}
	var got uint64
	for {
		piece, err := c.Do(ctx, "LOCKSERVER", "BACKUP", id).Slice()
		if err == nil && len(piece) != 2 {
			err = fmt.Errorf("a piece of %d elements", len(piece))
		}
		var body string
		if err == nil {
			var ok bool
			if body, ok = piece[0].(string); !ok {
				err = fmt.Errorf("a piece of %T", piece[0])
			}
		}
		if err == nil {
			_, err = w.Write([]byte(body))
		}
		if err != nil {
			w.Abort()
			return BackupInfo{}, fmt.Errorf("the backup, after %d bytes: %w", got, err)
		}
		got += uint64(len(body))
		if progress != nil {
			progress(got)
		}
		if piece[1] == nil {
			continue
		}
		sum := w.Sum()
		if want, _ := piece[1].(string); want != hex.EncodeToString(sum[:]) {
			w.Abort()
			return BackupInfo{}, fmt.Errorf("the backup's SHA-256 is %x here and %s on the leader: it was damaged on the way", sum, want)
		}
		break
	}
	if err := w.Commit(backupfile.Header{Cluster: cluster, Index: index, Term: term, Created: time.Unix(0, created)}); err != nil {
		return BackupInfo{}, err
	}
	return InspectBackup(path)
}

// beginTimeout bounds the search for a leader that begins a backup.
const beginTimeout = 30 * time.Second

// beginBackup begins a backup on the leader that the member at addr names,
// as a client rides out a leader change: a member that knows no leader yet,
// or names one that no longer leads, is asked again. It returns the client
// of the leader and its reply.
func beginBackup(ctx context.Context, addr string, dial func(addr string) *redis.Client) (*redis.Client, any, error) {
	ctx, cancel := context.WithTimeout(ctx, beginTimeout)
	defer cancel()
	first := dial(addr)
	defer first.Close()
	for {
		v, err := first.Do(ctx, "LOCKSERVER", "LEADER").Result()
		at := replyMap(v)["client"]
		if err == nil && at != "" {
			c := dial(at)
			v, err = c.Do(ctx, "LOCKSERVER", "BACKUP").Result()
			if err == nil {
				return c, v, nil
			}
			c.Close()
			if !leaderMoved(err) {
				return nil, nil, fmt.Errorf("begin the backup on %s: %w", at, err)
			}
		}
		if err != nil && !leaderMoved(err) && !errors.Is(err, redis.Nil) {
			return nil, nil, fmt.Errorf("ask %s for the leader: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("no leader began the backup: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// leaderMoved reports whether err says that the leader changed or is not
// known yet: what a member says while an election runs.
func leaderMoved(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"ERR not the leader", "ERR no leader", "ERR leadership was lost", "ERR barrier", "CLUSTERDOWN", "TRYAGAIN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// replyMap reads a map reply as RESP3 gives it or RESP2's flat array.
func replyMap(v any) map[string]string {
	m := map[string]string{}
	switch t := v.(type) {
	case map[any]any:
		for k, v := range t {
			m[fmt.Sprint(k)] = fmt.Sprint(v)
		}
	case []any:
		for i := 0; i+1 < len(t); i += 2 {
			m[fmt.Sprint(t[i])] = fmt.Sprint(t[i+1])
		}
	}
	return m
}

// openBackup checks the backup file path whole and reads its state.
func openBackup(path string, r *Raft) (backupfile.Header, *stateMachine, error) {
	h, f, body, err := backupfile.Open(path)
	if err != nil {
		return h, nil, err
	}
	defer f.Close()
	sm, _, applied, err := readSnapshot(body, r)
	if err != nil {
		return h, nil, fmt.Errorf("backup %s: %w", path, err)
	}
	if applied != h.Index {
		return h, nil, fmt.Errorf("backup %s: its header says index %d and its state %d", path, h.Index, applied)
	}
	return h, sm, nil
}

func backupInfo(h backupfile.Header, sm *stateMachine) BackupInfo {
	info := BackupInfo{
		Cluster: memberlink.ClusterID(h.Cluster).String(), Index: h.Index, Term: h.Term, Created: h.Created,
		Bytes: h.Length, SHA256: hex.EncodeToString(h.SHA256[:]), Epoch: sm.epoch, ClusterVersion: sm.cluster.get().String(),
	}
	for db := range keyspace.NumDBs {
		keys, volatile := sm.store.KeyCounts(db)
		info.Keys += keys
		info.Leases += volatile
	}
	return info
}

// offline returns an engine for reading state outside a running member.
func offline(nodeID string) (*Raft, error) { return newEngine(RaftOptions{NodeID: nodeID}) }

// InspectBackup checks the backup file path whole, its hash, each block's
// checksum and the state it holds, and describes it. A file damaged since it
// was written fails with an error that names the offset of the damage.
func InspectBackup(path string) (BackupInfo, error) {
	r, err := offline("inspect")
	if err != nil {
		return BackupInfo{}, err
	}
	h, sm, err := openBackup(path, r)
	if err != nil {
		return BackupInfo{}, err
	}
	return backupInfo(h, sm), nil
}

// RestoreOptions say where, and as which member of a new cluster, a backup
// is restored.
type RestoreOptions struct {
	From    string // the backup file
	DataDir string // the new member's data directory: absent or empty
	NodeID  string
	// Bootstrap lists the voters of the new cluster, this member among them,
	// as each of them is given it; ClusterToken goes into the new identity.
	Bootstrap    []Peer
	ClusterToken string
}

// RestoreBackup makes DataDir the data directory of a member of a new
// cluster whose state is the backup's, at its index. Every member restored
// from the same backup with the same Bootstrap list and token holds the same
// state and the same new cluster identity, which is not the old one: a
// member of the cluster the backup came from is refused by the link check.
// The state's epoch is one above the backup's, so that the fencing tokens
// the new cluster issues exceed every one issued before (see package lock),
// and its cluster version is this build's. Leases keep their deadlines on
// the log clock.
func RestoreBackup(o RestoreOptions) (BackupInfo, error) {
	if !slices.ContainsFunc(o.Bootstrap, func(p Peer) bool { return p.ID == o.NodeID }) {
		return BackupInfo{}, fmt.Errorf("restore: this member, %s, is not among the bootstrap list's voters", o.NodeID)
	}
	if err := emptyDir(o.DataDir); err != nil {
		return BackupInfo{}, err
	}
	r, err := newEngine(RaftOptions{NodeID: o.NodeID, Bootstrap: o.Bootstrap})
	if err != nil {
		return BackupInfo{}, err
	}
	h, sm, err := openBackup(o.From, r)
	if err != nil {
		return BackupInfo{}, err
	}
	info := backupInfo(h, sm)
	sm.newCluster(r.build)
	id := restoredClusterID(h.SHA256, o.Bootstrap, o.ClusterToken)
	conf := r.bootstrapConfiguration()
	snap := &raftSnapshot{r: r, applied: h.Index, last: sm.lastTime(), members: map[string]string{}, cluster: sm.cluster, epoch: sm.epoch, sm: sm.freeze()}
	defer snap.sm.release()
	err = withDir(o.DataDir, r, func(d *storage.Dir) error {
		_, trans := raft.NewInmemTransport("")
		sink, err := d.SnapshotStore.Create(raft.SnapshotVersionMax, h.Index, h.Term, conf, h.Index, trans)
		if err != nil {
			return err
		}
		if err := snap.write(sink); err != nil {
			sink.Cancel()
			return err
		}
		if err := sink.Close(); err != nil {
			return err
		}
		return errors.Join(d.StableStore.SetUint64(keyCurrentTerm, h.Term), d.StableStore.Set(keyClusterID, id[:]))
	})
	if err != nil {
		return BackupInfo{}, fmt.Errorf("restore into %s: %w", o.DataDir, err)
	}
	return info, nil
}

// keyCurrentTerm is raft's stable store key of the current term.
var keyCurrentTerm = []byte("CurrentTerm")

// restoredClusterID is the identity of a cluster restored from the backup
// whose body hashes to sum, with voters and token: members restored alike
// agree on it, and it is no cluster's that the backup came from.
func restoredClusterID(sum [32]byte, voters []Peer, token string) memberlink.ClusterID {
	return derivedClusterID("lockserver restore\x00"+hex.EncodeToString(sum[:])+"\x00"+token+"\x00", voters)
}

// emptyDir refuses a data directory that holds anything.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: restore into a new data directory", dir)
	}
	return nil
}

// withDir opens the data directory dir, with its checks, for f.
func withDir(dir string, r *Raft, f func(*storage.Dir) error) error {
	d, err := storage.OpenDir(dir, newHCLogger(r.log), func(error) {})
	if err != nil {
		return err
	}
	return errors.Join(f(d), d.Close())
}

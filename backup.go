package lockserver

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/lockserver/lockserver/replication"
	"github.com/redis/go-redis/v9"
)

// The lifecycle of a cluster's state outside a running member: a backup
// taken from the leader over the client port, checked, and restored into
// the members of a new cluster; and the recovery of a cluster that lost a
// majority of its members for good. docs/operations.md says when to use
// which; the lockserver command runs each (lockserver backup, restore,
// inspect, recover).

// BackupInfo describes a backup file, checked whole: the cluster it came
// from, its index and term, the body's length and SHA-256, the state's
// epoch and cluster version, and its keys and leases (a lock is a key with
// a lease).
type BackupInfo = replication.BackupInfo

// BackupOptions say where a backup comes from and goes to.
type BackupOptions struct {
	// Addr is the client address of any member: the backup is taken from
	// the leader it names.
	Addr string
	// Username and Password authenticate as a client does (the user must
	// be allowed LOCKSERVER BACKUP, an @admin command); TLS, when set, is the
	// client TLS configuration.
	Username, Password string
	TLS                *tls.Config
	// To is the file written: whole, or not at all.
	To string
	// Progress, when set, is told the bytes received so far.
	Progress func(bytes uint64)
}

// Backup takes a backup of a running cluster: the leader's state at one
// applied index, after a barrier, so that it holds every write acknowledged
// before Backup began.
func Backup(ctx context.Context, o BackupOptions) (BackupInfo, error) {
	dial := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{
			Addr: addr, Username: o.Username, Password: o.Password, TLSConfig: o.TLS,
			// A piece is a megabyte; the leader's barrier may wait for an
			// election.
			ReadTimeout: time.Minute, MaxRetries: -1, DisableIdentity: true,
		})
	}
	return replication.SaveBackup(ctx, o.Addr, dial, o.To, o.Progress)
}

// InspectBackup checks the backup file path whole (a damaged one fails with
// the offset of the damage) and describes it.
func InspectBackup(path string) (BackupInfo, error) { return replication.InspectBackup(path) }

// RestoreOptions say where, and as which member of a new cluster, a backup
// is restored.
type RestoreOptions struct {
	From    string // the backup file
	DataDir string // the new member's data directory: absent or empty
	NodeID  string
	// Bootstrap lists the voters of the new cluster, this member among them;
	// give every member the same list and ClusterToken.
	Bootstrap    []Peer
	ClusterToken string
}

// Restore makes o.DataDir the data directory of a member of a new cluster
// whose state is the backup's. Restore every voter of o.Bootstrap from the
// same file, then start each with its data directory. The new cluster has
// an identity of its own, which refuses the old cluster's members, and the
// fencing tokens it issues exceed every one issued before the restore.
func Restore(o RestoreOptions) (BackupInfo, error) {
	return replication.RestoreBackup(replication.RestoreOptions{
		From: o.From, DataDir: o.DataDir, NodeID: o.NodeID, Bootstrap: raftPeers(o.Bootstrap), ClusterToken: o.ClusterToken,
	})
}

// DataDirInfo describes a stopped member's data directory: its cluster, the
// last entry of its log, its term, its newest snapshot's index and the
// members it knows.
type DataDirInfo = replication.DataDirInfo

// DirMember is a member a data directory's configuration names.
type DirMember = replication.DirMember

// InspectDataDir reads the data directory of a stopped member, with the
// checks a start makes, and describes it.
func InspectDataDir(dir string) (DataDirInfo, error) { return replication.InspectDataDir(dir) }

// RecoverOptions say which stopped member recovers a cluster that lost a
// majority, and where the others reach its Raft transport.
type RecoverOptions struct {
	DataDir, NodeID, RaftAddr string
}

// Recover makes the stopped member of o.DataDir the one voter of a new
// cluster, with every entry its log holds; what it never had is lost. Start
// it, then join the others to it with empty data directories. It returns
// the directory as it was before.
func Recover(o RecoverOptions) (DataDirInfo, error) {
	return replication.Recover(replication.RecoverOptions(o))
}

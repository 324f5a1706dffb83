package replication

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// RaftOptions configure a Raft engine. NodeID and RaftAddr are required;
// the zero value of every other field is a sensible default.
type RaftOptions struct {
	// NodeID names this node in the cluster for all time.
	NodeID string
	// RaftAddr is the host:port the Raft transport listens on and the other
	// nodes reach it at (so a concrete address, not 0.0.0.0).
	RaftAddr string
	// RaftAdvertise, when set, is the host:port the other nodes reach the
	// transport at instead of RaftAddr: a proxy's or a NAT's in front of it.
	RaftAdvertise string
	// ClientAddr is where clients reach this node's RESP server: what the
	// members tell clients of it (Sentinel and CLUSTER replies). The members
	// themselves call each other at their Raft addresses.
	ClientAddr string
	// DataDir holds the Raft log and stable store (raft.db, fsync on) and the
	// snapshots. Empty keeps them in memory.
	DataDir string
	// Bootstrap lists the voters of a new cluster, this node among them at
	// RaftAdvertise or else RaftAddr (NewRaft refuses a list that is not: the
	// others could never reach this node). It is used, and checked, only
	// when the node has no state yet. A node with no state first asks the
	// other voters of the list whether it ran in their cluster before: if
	// one says so, it lost its data, and it joins through that one, as with
	// Join, rather than bootstrap again, which would make it a voter with an
	// empty log that could elect a stale candidate.
	Bootstrap []Peer
	// Join is the Raft address of any member of an existing cluster. A node
	// with no state asks it to add this node, as a non-voter that the leader
	// promotes once it has caught up, and learns the cluster's identity from
	// it. With neither Bootstrap nor Join, a node with no state bootstraps a
	// cluster of its own that others may join.
	Join string
	// JoinTimeout is how long NewRaft keeps asking Join's member before it
	// gives up with an error (default one minute).
	JoinTimeout time.Duration

	// Members prove to each other that they are members (see memberlink)
	// with mutual TLS, a shared secret, or both. ClusterSecret, when set, is
	// the secret: at least 16 bytes, the same on every member. TLS, when
	// set, puts every link between members in mutual TLS.
	ClusterSecret string
	TLS           *MemberTLS
	// InsecureCluster lets a member whose RaftAddr is not a loopback address
	// start with neither: anyone who reaches its Raft port is then a member.
	InsecureCluster bool
	// ClusterToken goes into the identity of a cluster bootstrapped with a
	// list of voters, so that two clusters bootstrapped with the same list
	// (the same addresses reused) are not taken for one.
	ClusterToken string

	Lua luaexec.Options
	// Users are the ACL users, which the log changes; nil means the default
	// user alone. A new cluster's first leader seeds the cluster's users
	// with those it holds when it starts leading (see LoadUsersCommand).
	Users *acl.Registry
	// Hub receives the messages of the entries this node applies live.
	Hub    keyspace.Publisher
	Logger *slog.Logger

	// HeartbeatTimeout and ElectionTimeout default to 1 s. A leader that
	// hears from no majority for HeartbeatTimeout steps down.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// CloseSnapshotTimeout bounds the snapshot Close takes when much log was
	// written since the last one, and one under way when Close is called
	// (default 5 s): past it the snapshot is abandoned and the restart
	// replays the log instead. A stop must not outlast an orchestrator's
	// grace period (docker stop: 10 s; Kubernetes: 30 s), after which the
	// process is killed anyway, and at millions of keys a snapshot takes
	// longer than that.
	CloseSnapshotTimeout time.Duration

	// The fields below tune what the engine decides itself; tests set them.
	//
	// commitTimeout is raft's CommitTimeout (default 5 ms).
	commitTimeout time.Duration
	// A snapshot starts once the log written since the last one holds
	// snapshotLogBytes (default 64 MB) and half as many bytes as that
	// snapshot: a large state is snapshotted rarely, and a restart replays
	// at most about half its size of log. snapshotThreshold, when set, starts
	// one after as many entries too. After a snapshot the log keeps the
	// entries written since the one before, and at least trailingLogs
	// (default 10240), so that a follower that fell behind by less catches up
	// from the log rather than by receiving a snapshot.
	snapshotLogBytes                int64
	snapshotThreshold, trailingLogs uint64
	// snapshotInterval is how often snapshotThreshold is checked (default 30 s).
	snapshotInterval time.Duration
	// forwardWait is how long a follower waits for a reachable leader before
	// it answers CLUSTERDOWN (default 3 s).
	forwardWait time.Duration

	// The fields below replace what DataDir, RaftAddr and the process give, so
	// that tests can run nodes in memory, cut the network and step clocks.
	// transport and peers replace the member link together; with them,
	// RaftAddr is not needed.
	transport     raft.Transport
	logStore      raft.LogStore
	stableStore   raft.StableStore
	snapshotStore raft.SnapshotStore
	// peers carries internal commands to other members; nil means go-redis
	// over the member link.
	peers peerClient
	// mono and wall are the clocks the log clock reads (see logclock.Clock);
	// nil means the process's own.
	mono func() time.Duration
	wall func() time.Time
	// build is the release this member says it runs: buildinfo.Version
	// unless a test plays an older or newer build; peerBuilds, when set,
	// replaces what the member link says each peer runs.
	build      string
	peerBuilds func() map[string]string
	// firstStand, when set, replaces the wait of standUnheard, so that a
	// test can tell a member that stands early from one that waits for
	// raft's own timer.
	firstStand time.Duration
	// beforeApply, when set, runs before the FSM applies each batch, so that
	// a test can hold a member's state machine behind its log.
	beforeApply func()
}

// Peer is one voter of a new cluster.
type Peer struct {
	ID       string
	RaftAddr string
}

// MemberTLS secures the links between members with mutual TLS (see
// memberlink.TLS).
type MemberTLS = memberlink.TLS

func (o RaftOptions) withDefaults() RaftOptions {
	o.build = cmp.Or(o.build, buildinfo.Version)
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HeartbeatTimeout, time.Second)
	def(&o.ElectionTimeout, time.Second)
	def(&o.commitTimeout, 5*time.Millisecond)
	def(&o.snapshotInterval, 30*time.Second)
	def(&o.CloseSnapshotTimeout, 5*time.Second)
	def(&o.forwardWait, 3*time.Second)
	def(&o.JoinTimeout, time.Minute)
	if o.snapshotLogBytes <= 0 {
		o.snapshotLogBytes = 64 << 20
	}
	if o.snapshotThreshold == 0 {
		o.snapshotThreshold = math.MaxUint64 // by bytes alone (see snapshotLoop)
	}
	if o.trailingLogs == 0 {
		o.trailingLogs = 10240
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// checkSecurity checks how members will tell each other from strangers.
func (o *RaftOptions) checkSecurity() error {
	if o.ClusterSecret != "" && len(o.ClusterSecret) < minSecret {
		return fmt.Errorf("the cluster secret must be at least %d bytes", minSecret)
	}
	if o.TLS != nil {
		if o.TLS.Config == nil || o.TLS.Names == "" {
			return errors.New("member TLS needs Config and Names (the pattern of the members' certificate names)")
		}
		if _, err := path.Match(o.TLS.Names, ""); err != nil {
			return fmt.Errorf("member certificate name pattern %q: %w", o.TLS.Names, err)
		}
	}
	if o.transport == nil && o.ClusterSecret == "" && o.TLS == nil && !o.InsecureCluster {
		for _, addr := range []string{o.RaftAddr, o.RaftAdvertise} {
			if addr != "" && !memberlink.IsLoopback(addr) {
				return fmt.Errorf("the Raft address %s is not a loopback address, and with neither a cluster secret nor member TLS anyone who reaches it would be taken for a member: give one (or allow it as an insecure cluster)", addr)
			}
		}
	}
	return nil
}

// minSecret is the shortest cluster secret accepted: 128 bits, if random.
const minSecret = 16

// peerClient carries internal LOCKSERVER commands to other members:
// forwarded requests, joins, member registrations, progress checks.
type peerClient interface {
	// Call sends args to the member whose Raft address is addr and returns its
	// reply, a status or bulk string. An error reply comes as an error that
	// carries it (keyspace.ReplyOf); an error
	// that wraps memberlink.ErrNotSent means the command never reached the
	// node.
	Call(ctx context.Context, addr string, args ...[]byte) (string, error)
	Close() error
}

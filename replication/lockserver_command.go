package replication

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/keyspace"
)

// The LOCKSERVER command administers the cluster. Any node serves it; the
// subcommands that change the membership run on the leader, to which the
// other nodes relay them. The command table (keyspace) holds the
// subcommands' arities and flags; those flagged Member are the calls
// members make to each other, which the server lets only members send.
//
//	LOCKSERVER STATUS                       this node: state, term, leader, indexes, readiness, cluster identity
//	LOCKSERVER MEMBERS                      the members, their addresses and roles
//	LOCKSERVER LEADER                       the leader's id and client address
//	LOCKSERVER SNAPSHOT                     take a snapshot of this node now
//	LOCKSERVER REMOVE id                    remove a node
//	LOCKSERVER DOWNGRADE version|CANCEL     lower the cluster version, to roll the cluster back
//	LOCKSERVER DIGEST                       this node's applied index, and a hash of its state then
//	LOCKSERVER BACKUP [id]                  on the leader: begin a backup, or its next piece (backup.go)
//	LOCKSERVER JOIN id raft-addr client-addr  add a node, as a non-voter until it catches up (members only)
//	LOCKSERVER REGISTER id client-addr      record a member's client address (members only)
//	LOCKSERVER APPLIED                      this node's applied index (members only: the leader asks it)
//	LOCKSERVER REGISTERED id                1 if member id ever registered its client address here (members only)
//	LOCKSERVER ACKED                        on the leader: the index WAIT waits for (members only)
//	LOCKSERVER FORWARD batch                run requests forwarded by a follower (members only)
const clusterHelp = `LOCKSERVER <subcommand> [<arg> ...]. Subcommands are:
STATUS
    This node's Raft state, term, leader, log indexes, and whether it is ready
    for clients (it knows a leader and has applied what it knows committed).
MEMBERS
    Every member: id, Raft address, client address, voter or not.
LEADER
    The leader's id and client address.
SNAPSHOT
    Take a snapshot of this node's state now.
REMOVE <id>
    Remove a node from the cluster.
DIGEST
    The index of the last entry this node applied, and a SHA-256 of its
    state then, which every member that applied as much shares.
BACKUP [<id>]
    On the leader: begin a backup of the cluster's state at one applied
    index (id, index, term, cluster), then read it piece by piece with its
    id; the last piece comes with the SHA-256 of the whole. lockserver
    backup --to FILE does both.
DOWNGRADE <version>|CANCEL
    Lower the cluster version to <version> (MAJOR.MINOR, one release back),
    so that the members write only what that release reads, before they are
    rolled back to it; CANCEL lets the cluster version rise again.
JOIN <id> <raft-addr> <client-addr>
    Add a node as a non-voter; the leader promotes it once it has caught up.
    The id of a live member at other addresses is refused. Members only: a
    joining node sends it.
REGISTER <id> <client-addr>
    Record a member's client address. Members only.
APPLIED
    The index of the last entry this node applied. Members only.
REGISTERED <id>
    1 if member <id> has run in the cluster (it registered its client
    address), else 0. Members only: a member with no data asks it.
ACKED
    On the leader: an index at or above every write acknowledged so far.
    Members only.
FORWARD <batch>
    Run a batch of requests forwarded by another node. Members only.
HELP
    Print this help.`

// adminTimeout bounds a membership change.
const adminTimeout = 30 * time.Second

// The internal commands a member sends another.
var (
	argLockserver = []byte("LOCKSERVER")
	argForward    = []byte("FORWARD")
)

// A clusterExecutor serves a LOCKSERVER subcommand on this node: a cluster
// member's engine registers one for every row of the command table's
// cluster layer (keyspace.ClusterLayer).
type clusterExecutor func(r *Raft, req *Request, args [][]byte)

func init() {
	for name, x := range map[string]clusterExecutor{
		"lockserver|forward": func(r *Raft, req *Request, args [][]byte) { r.serveForward(req, args[2]) },
		"lockserver|status":  (*Raft).serveStatus,
		"lockserver|members": (*Raft).serveMembers,
		"lockserver|leader":  (*Raft).serveLeader,
		"lockserver|applied": func(r *Raft, req *Request, _ [][]byte) {
			req.finish(keyspace.Bulk(strconv.FormatUint(r.applied.Load(), 10)))
		},
		"lockserver|registered": func(r *Raft, req *Request, args [][]byte) {
			ran := "0"
			if r.memberAddr(string(args[2])) != "" {
				ran = "1"
			}
			req.finish(keyspace.Bulk(ran))
		},
		"lockserver|acked":  (*Raft).serveAcked,
		"lockserver|digest": (*Raft).serveDigest,
		"lockserver|backup": (*Raft).serveBackup,
		"lockserver|help": func(_ *Raft, req *Request, _ [][]byte) {
			req.finish(keyspace.BulkArray(strings.Split(clusterHelp, "\n")))
		},
		"lockserver|snapshot": clusterChange(func(r *Raft, _ context.Context, _ [][]byte) (keyspace.Reply, error) {
			return keyspace.OK, r.takeSnapshot()
		}),
		"lockserver|join": clusterChange(func(r *Raft, ctx context.Context, args [][]byte) (keyspace.Reply, error) {
			// The joiner learns the cluster's identity: this member's, which
			// the leader's is, the link to it having checked that.
			return keyspace.Bulk(r.cluster.String()), r.onLeader(ctx, args, func() error {
				return r.addNode(ctx, string(args[2]), string(args[3]), string(args[4]))
			})
		}),
		"lockserver|downgrade": clusterChange(func(r *Raft, ctx context.Context, args [][]byte) (keyspace.Reply, error) {
			return keyspace.OK, r.onLeader(ctx, args, func() error { return r.downgrade(string(args[2])) })
		}),
		"lockserver|remove": clusterChange(func(r *Raft, ctx context.Context, args [][]byte) (keyspace.Reply, error) {
			return keyspace.OK, r.onLeader(ctx, args, func() error { return r.removeNode(ctx, string(args[2])) })
		}),
		"lockserver|register": clusterChange(func(r *Raft, ctx context.Context, args [][]byte) (keyspace.Reply, error) {
			return keyspace.OK, r.onLeader(ctx, args, func() error { return r.registerNode(ctx, string(args[2]), string(args[3])) })
		}),
	} {
		keyspace.Register(keyspace.ClusterLayer, name, x)
	}
}

// clusterRow returns the row of req's command when it is a LOCKSERVER
// command, which the node that receives it serves itself; nil otherwise.
func clusterRow(req *Request) *keyspace.Command {
	if len(req.Cmds) != 1 || req.Multi || req.WatchKeys != nil {
		return nil
	}
	if cmd := keyspace.Lookup(req.Cmds[0][0]); cmd != nil && cmd.Layer == keyspace.ClusterLayer {
		return cmd
	}
	return nil
}

// clusterSub returns the row of the subcommand of args, a LOCKSERVER
// command whose row is cmd, or the error reply when it names none or has the
// wrong number of arguments. The server has checked the command against the
// table; a caller that submits to the engine directly gets the same errors.
func clusterSub(cmd *keyspace.Command, args [][]byte) (*keyspace.Command, *keyspace.Reply) {
	var errReply keyspace.Reply
	switch sub := cmd.Resolve(args); {
	case len(args) < 2:
		errReply = keyspace.ErrWrongArity(cmd.Name)
	case sub == nil:
		errReply = keyspace.ErrUnknownSubcommand(args)
	case !sub.CheckArity(len(args)):
		errReply = keyspace.ErrWrongArity(sub.Name)
	default:
		return sub, nil
	}
	return nil, &errReply
}

// clusterCommand serves req, a LOCKSERVER command whose row is cmd, on this
// node.
func (r *Raft) clusterCommand(cmd *keyspace.Command, req *Request) {
	args := req.Cmds[0]
	sub, errReply := clusterSub(cmd, args)
	if errReply != nil {
		req.finish(*errReply)
		return
	}
	sub.Executor().(clusterExecutor)(r, req, args)
}

func (r *Raft) serveStatus(req *Request, _ [][]byte) {
	st := r.Status()
	if err := r.readyNow(); err != nil {
		st.notReady = err.Error()
	}
	req.finish(st.reply())
}

func (r *Raft) serveMembers(req *Request, _ [][]byte) {
	st := r.Status()
	members := make([]keyspace.Reply, len(st.Members))
	for i, m := range st.Members {
		members[i] = m.reply(m.ID == st.LeaderID)
	}
	req.finish(keyspace.Array(members...))
}

func (r *Raft) serveLeader(req *Request, _ [][]byte) {
	st := r.Status()
	if st.LeaderID == "" {
		req.finish(keyspace.Null)
		return
	}
	req.finish(keyspace.Map(keyspace.Bulk("id"), keyspace.Bulk(st.LeaderID), keyspace.Bulk("client"), keyspace.Bulk(st.LeaderAddr)))
}

func (r *Raft) serveAcked(req *Request, _ [][]byte) {
	target, ok := r.ackedIndex()
	if !ok {
		req.finish(keyspace.Error(errTryAgain))
		return
	}
	req.finish(keyspace.Bulk(strconv.FormatUint(target, 10)))
	// The members learn that target is committed from the next append.
	r.sendCommitIndex()
}

// serveDigest answers LOCKSERVER DIGEST: the index of the last entry this
// member applied and a SHA-256 of its state then, in a snapshot's form,
// which every member that applied the same entries shares, whatever its
// build: what a test of a cluster of mixed builds compares. The state is
// hashed beside apply, as a snapshot is written.
func (r *Raft) serveDigest(req *Request, _ [][]byte) {
	r.smMu.Lock()
	s := r.freeze()
	r.smMu.Unlock()
	go func() {
		defer s.Release()
		h := sha256.New()
		if err := s.write(h); err != nil {
			req.finish(keyspace.Error("ERR " + err.Error()))
			return
		}
		req.finish(keyspace.Map(keyspace.Bulk("applied_index"), keyspace.Int(int64(s.applied)),
			keyspace.Bulk("digest"), keyspace.Bulk(hex.EncodeToString(h.Sum(nil)))))
	}()
}

// clusterChange returns the executor of a subcommand that waits for Raft:
// SNAPSHOT here, and the membership changes on the leader. change returns
// the reply it has when it succeeds. The executor answers from a goroutine,
// as the engine does every request, so that the connection is not held
// meanwhile.
func clusterChange(change func(r *Raft, ctx context.Context, args [][]byte) (keyspace.Reply, error)) clusterExecutor {
	return func(r *Raft, req *Request, args [][]byte) {
		go func() {
			ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
			defer cancel()
			ok, err := change(r, ctx, args)
			rerr, refused := keyspace.ReplyOf(err)
			switch {
			case err == nil:
				req.finish(ok)
			case refused:
				req.finish(rerr)
			case errors.Is(err, raft.ErrNothingNewToSnapshot):
				req.finish(keyspace.Error("ERR nothing new to snapshot"))
			default:
				req.finish(keyspace.Error("ERR " + err.Error()))
			}
		}()
	}
}

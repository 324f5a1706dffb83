package replication

import (
	"bytes"
	"context"
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
//	LOCKSERVER JOIN id raft-addr client-addr  add a node, as a non-voter until it catches up (members only)
//	LOCKSERVER REGISTER id client-addr      record a member's client address (members only)
//	LOCKSERVER APPLIED                      this node's applied index (members only: the leader asks it)
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
JOIN <id> <raft-addr> <client-addr>
    Add a node as a non-voter; the leader promotes it once it has caught up.
    The id of a live member at other addresses is refused. Members only: a
    joining node sends it.
REGISTER <id> <client-addr>
    Record a member's client address. Members only.
APPLIED
    The index of the last entry this node applied. Members only.
ACKED
    On the leader: an index at or above every write acknowledged so far.
    Members only.
FORWARD <batch>
    Run a batch of requests forwarded by another node. Members only.
HELP
    Print this help.`

// adminTimeout bounds a membership change.
const adminTimeout = 30 * time.Second

// The internal commands. LOCKSERVER is one row of the command table; the node
// that receives it serves it itself (see clusterCommand).
var (
	argLockserver = []byte("LOCKSERVER")
	argForward    = []byte("FORWARD")
)

// isClusterCommand reports whether req is a LOCKSERVER command, which the node
// that receives it serves itself.
func isClusterCommand(req *Request) bool {
	return len(req.Cmds) == 1 && !req.Multi && req.WatchKeys == nil &&
		bytes.EqualFold(req.Cmds[0][0], []byte("lockserver"))
}

// clusterCommand serves a LOCKSERVER command on this node.
func (r *Raft) clusterCommand(req *Request) {
	args := req.Cmds[0]
	// The server has checked the command against the table; a caller that
	// submits to the engine directly gets the same errors.
	cmd := keyspace.Lookup(args[0])
	if len(args) < 2 {
		req.finish(keyspace.ErrWrongArity(cmd.Name))
		return
	}
	if cmd = cmd.Resolve(args); cmd == nil {
		req.finish(keyspace.ErrUnknownSubcommand(args))
		return
	}
	if !cmd.CheckArity(len(args)) {
		req.finish(keyspace.ErrWrongArity(cmd.Name))
		return
	}
	switch sub := strings.TrimPrefix(cmd.Name, "lockserver|"); {
	case sub == "forward":
		r.serveForward(req, args[2])
	case sub == "status":
		st := r.Status()
		if err := r.readyNow(); err != nil {
			st.notReady = err.Error()
		}
		req.finish(st.reply())
	case sub == "members":
		st := r.Status()
		members := make([]keyspace.Reply, len(st.Members))
		for i, m := range st.Members {
			members[i] = m.reply(m.ID == st.LeaderID)
		}
		req.finish(keyspace.Array(members...))
	case sub == "leader":
		st := r.Status()
		if st.LeaderID == "" {
			req.finish(keyspace.Null)
			return
		}
		req.finish(keyspace.Map(keyspace.Bulk("id"), keyspace.Bulk(st.LeaderID), keyspace.Bulk("client"), keyspace.Bulk(st.LeaderAddr)))
	case sub == "applied":
		req.finish(keyspace.Bulk(strconv.FormatUint(r.applied.Load(), 10)))
	case sub == "acked":
		if target, ok := r.ackedIndex(); ok {
			req.finish(keyspace.Bulk(strconv.FormatUint(target, 10)))
			// The members learn that target is committed from the next append.
			r.sendCommitIndex()
		} else {
			req.finish(keyspace.Error(errTryAgain))
		}
	case sub == "help":
		req.finish(keyspace.BulkArray(strings.Split(clusterHelp, "\n")))
	default:
		// The rest wait for Raft: answer from a goroutine, as the engine does
		// every request, so that the connection is not held.
		go func() { req.finish(r.clusterChange(sub, args)) }()
	}
}

// clusterChange runs SNAPSHOT here and the membership changes on the leader.
func (r *Raft) clusterChange(sub string, args [][]byte) keyspace.Reply {
	ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
	defer cancel()
	var err error
	switch sub {
	case "snapshot":
		err = r.takeSnapshot()
	case "join":
		err = r.onLeader(ctx, args, func() error {
			return r.addNode(ctx, string(args[2]), string(args[3]), string(args[4]))
		})
	case "remove":
		err = r.onLeader(ctx, args, func() error { return r.removeNode(ctx, string(args[2])) })
	case "register":
		err = r.onLeader(ctx, args, func() error { return r.registerNode(ctx, string(args[2]), string(args[3])) })
	}
	var rerr ReplyError
	switch {
	case err == nil && sub == "join":
		// The joiner learns the cluster's identity: this member's, which
		// the leader's is, the link to it having checked that.
		return keyspace.Bulk(r.cluster.String())
	case err == nil:
		return keyspace.OK
	case errors.As(err, &rerr):
		return keyspace.Error(string(rerr))
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		return keyspace.Error("ERR nothing new to snapshot")
	}
	return keyspace.Error("ERR " + err.Error())
}

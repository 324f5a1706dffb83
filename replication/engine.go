// Package replication runs lockserver's commands on a replicated state
// machine. Its engines are Standalone, a single node without a log, and
// Raft, a member of a cluster whose every write is an entry of a Raft log.
//
// What an Engine promises the server: the requests one goroutine submits
// take effect in the order it submits them; a write is answered once it is
// applied, which on Raft is once a majority of the members hold it on disk;
// a read sees every write answered before it was submitted, on any member;
// an error reply says whether a write may have taken effect (CLUSTERDOWN
// and TRYAGAIN: it did not; UNKNOWN: it may have). Every member applies the
// same entries in the same order with the same results, on replay and after
// a restore too: the state machine is deterministic.
//
// The path of one command: the server hands a Request to an Engine. The
// engine has the state machine prepare it (validate it, and tell a read
// from a write). A write becomes a log entry (logcodec.Entry) stamped by
// the log clock, which Standalone applies at once and Raft proposes
// (propose.go) and applies on every member once committed (fsm.go). A read
// runs on the state machine at the log clock's current time (read.go).
//
// Under the engines, internal/storage keeps a member's log and snapshots on
// disk, internal/memberlink carries what members say to each other, and
// internal/logcodec encodes both.
package replication

import (
	"context"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// Engine runs requests against the replicated state machine. Requests that one
// goroutine submits take effect in the order it submits them.
type Engine interface {
	// Submit starts req. Its reply is available through req.Wait.
	Submit(req *Request)
	// Now returns the log clock's current time in milliseconds.
	Now() int64
	// Info reports the figures INFO shows about this node.
	Info() Info
	// WaitReplicas serves WAIT: it waits until at least n other nodes hold
	// every write acknowledged to any client before the call, for at most
	// timeout (0: no limit) or until ctx ends, and returns how many hold
	// them then, with ctx's error if it ended the wait. With n <= 0 it does
	// not wait. Any other error carries the error reply to give the client
	// (keyspace.ReplyOf).
	WaitReplicas(ctx context.Context, n int, timeout time.Duration) (int, error)
	// Close stops the engine.
	Close() error
}

// Info describes a node for INFO and HELLO.
type Info struct {
	// Role is Redis's name for what the node does: "master" when it takes
	// writes, "slave" otherwise.
	Role string
	// Replicas is the number of other nodes that receive this node's writes
	// (INFO's connected_slaves): those WAIT can count.
	Replicas int
	// Keys and Expires count each database's keys and keys with a deadline,
	// expired ones not yet swept included, as Redis's INFO keyspace does.
	Keys, Expires [keyspace.NumDBs]int
	// ExpiredKeys counts the keys reclaimed after their deadline since the
	// node started or restored a snapshot.
	ExpiredKeys int64
	// Scripts is how many scripts the script cache holds; ScriptsStopped how
	// many scripts the budget stopped (see luaexec.Options.Budget).
	Scripts        int
	ScriptsStopped int64
	// Libraries and Functions count the function libraries loaded and the
	// functions they hold.
	Libraries, Functions int
}

// Request is what a client connection asks of the engine: one command, the
// queued commands of an EXEC, or the versions of keys to WATCH.
type Request struct {
	DB    int
	Cmds  [][][]byte
	Multi bool
	Watch []Watch // for an EXEC: the keys WATCHed before it
	// WatchKeys, when set, asks for the current versions of these keys (WATCH);
	// the reply is an array of integers.
	WatchKeys []string
	// OverMemory is set by the server when used memory is over maxmemory:
	// DenyOOM commands are refused, and scripts run with Call.DenyOOM.
	OverMemory bool
	// User names the ACL user the commands scripts call are checked
	// against, as the users are at the script's place in the log (a user
	// deleted by then may run nothing). Empty allows them everything: the
	// server leaves it empty for a user allowed everything when it submits
	// the request, as it checks the request's own commands then.
	User string
	// Denials are the commands the request's scripts were refused, for the
	// ACL log of the node that answers the request: set when that node ran
	// the scripts (they are not carried back from the leader).
	Denials []acl.Denial
	// Calls are the commands the request's scripts called, for the command
	// statistics of the node that answers the request's client: it ran them,
	// or the leader did and sent them back with the reply. The engine
	// appends them to Calls[:0], so that a caller that reuses its requests
	// reuses their room.
	Calls []luaexec.ScriptCall

	// Alone is set by a client that has the replies of all its earlier
	// requests: the engine may then run a read before writes that other
	// clients submitted and that are not in the log yet.
	Alone bool

	// relay is set on a request that a follower forwards and answers with its
	// own reply, and carried to the leader and into the log entry.
	relay logcodec.RelayTag

	// dryFailed is set once a dry run of the request reached a write: it goes
	// to the log. unordered is set by Submit on a request whose place in the
	// log is not decided yet (see Unordered).
	dryFailed, unordered bool

	reply keyspace.Reply
	done  chan struct{} // nil when the reply was ready at Submit
}

// Unordered reports, once Submit has returned, whether the request may yet
// be ordered after requests submitted after it: its client must have its
// reply before it submits another.
func (r *Request) Unordered() bool { return r.unordered }

// Wait returns the request's reply once it is ready, or an error reply when
// ctx ends first (the outcome of a write is then unknown).
func (r *Request) Wait(ctx context.Context) keyspace.Reply {
	if r.done == nil {
		return r.reply
	}
	select {
	case <-r.done:
		return r.reply
	case <-ctx.Done():
		return keyspace.Error("ERR " + ctx.Err().Error() + " before the reply (the outcome of a write is unknown)")
	}
}

// Ready reports whether the reply is available without waiting.
func (r *Request) Ready() bool {
	if r.done == nil {
		return true
	}
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// start readies r for an asynchronous reply.
func (r *Request) start() { r.done = make(chan struct{}) }

// finish answers a request that start readied for an asynchronous reply.
func (r *Request) finish(reply keyspace.Reply) {
	r.reply = reply
	close(r.done)
}

// resolve sets the reply of a request that completes at Submit.
func (r *Request) resolve(reply keyspace.Reply) {
	r.reply = reply
	r.done = nil
}

// every calls f every period until stop is closed: the background loops of
// both engines (expiry, snapshots, registering, promoting).
func every(stop <-chan struct{}, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			f()
		}
	}
}

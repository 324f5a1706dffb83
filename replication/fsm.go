package replication

import (
	"maps"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// fsm is the Raft engine as hashicorp/raft sees it: its state machine.
// hashicorp/raft calls these methods from one goroutine.
type fsm Raft

// Apply applies one entry; ApplyBatch is the path raft takes.
func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in log order under the state machine's
// lock. Replies go to the requests of this node's proposals directly (see
// appliedLocal), not through raft's futures.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	r := (*Raft)(f)
	if r.opts.beforeApply != nil {
		r.opts.beforeApply()
	}
	if r.halted.Load() != nil {
		return make([]any, len(logs))
	}
	// Nothing is applied before this node has it on disk (see storage.Log).
	if err := r.logs.WaitDurable(logs[len(logs)-1].Index); err != nil {
		r.logFailed(err)
		return make([]any, len(logs))
	}
	r.committed = time.Now()
	r.smMu.Lock()
	defer r.smMu.Unlock()
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			r.applyLog(l)
			if r.halted.Load() != nil {
				return make([]any, len(logs)) // nothing past l
			}
		}
		r.logBytes.Add(uint64(len(l.Data)))
	}
	r.applied.Store(logs[len(logs)-1].Index)
	r.fwd.passed(logs[len(logs)-1].Index)
	return make([]any, len(logs))
}

// applyLog applies the entries of one Raft log entry, a batch that one node
// proposed, and moves the log clock along their stamps. Another node's
// stamps (another process's, this node's before a restart among them) set
// the clock (logclock.Clock.Follow), so that every node, a new leader too, continues
// the log's time line rather than its own wall clock's; this node's own only
// raise it (logclock.Clock.Observe): it may have stamped later batches since.
func (r *Raft) applyLog(l *raft.Log) {
	entries, err := logcodec.DecodeBatch(l.Data)
	if err != nil {
		// Skipped, the entry would leave this member's state unlike the
		// members that decode it: it stops instead.
		r.halt(l.Index, r.undecodable(err))
		return
	}
	stamped := false
	for i, e := range entries {
		if stamped = r.applyEntry(l.Index, i, e) || stamped; r.halted.Load() != nil {
			return
		}
	}
	if !stamped {
		return
	}
	if last := r.sm.Load().lastTime(); entries[0].Origin == r.origin {
		r.clock.Observe(last)
	} else {
		r.clock.Follow(last)
	}
}

// applyEntry applies entry number i of the log entry at index and reports whether
// it carried a stamp (a command or a sweep). Entries that were in the log when the node started are
// a replay: their messages were delivered, if ever, before the restart.
//
// A command's reply counts the subscribers of this node that received what it
// published, so it answers the entry's request on the node that serves the
// client: this node's own proposals, and the requests this node forwarded and
// relays (a replay's entries carry another process's origin, so neither).
func (r *Raft) applyEntry(index uint64, i int, e *logcodec.LogEntry) bool {
	reply := keyspace.OK
	var denials []acl.Denial
	var calls []luaexec.ScriptCall
	switch e.Kind {
	case logcodec.KindCommand:
		var pub keyspace.Publisher
		if index > r.replayUntil {
			pub = r.pub
		}
		// A batch holds at most maxBatchEntries, so the seed is unique.
		sm := r.sm.Load()
		// The calls of scripts are counted by the node that answers the
		// client, and only it times them.
		relayed := e.Relay.Origin == r.origin
		sm.record(e.Origin == r.origin || relayed)
		reply = sm.apply(&e.Entry, index<<16|uint64(i), pub)
		denials, calls = sm.takeDenials(), sm.calls()
		if relayed {
			r.fwd.appliedHere(e.Relay.Seq, reply, calls)
		}
	case logcodec.KindMemberSet:
		r.setMember(e.Member, e.Addr)
	case logcodec.KindMemberDel:
		r.setMember(e.Member, "")
	case logcodec.KindClusterVersion:
		r.applyClusterVersion(index, e)
	case logcodec.KindSweep:
		sm := r.sm.Load()
		start := time.Now()
		removed := sm.sweep(e.Entry.Time, e.Entry.DB, e.Sweep.From, e.Sweep.Shards)
		r.sweepTime.Add(int64(time.Since(start)))
		if removed > 0 {
			r.ret.swept(removed, sm.keyCount())
		}
		reply = keyspace.Int(int64(removed))
	}
	if e.Origin == r.origin {
		r.appliedLocal(e.Seq, reply, denials, calls)
	}
	return e.Kind == logcodec.KindCommand || e.Kind == logcodec.KindSweep
}

// setMember records a node's client address; "" forgets the node.
func (r *Raft) setMember(id, addr string) {
	m := maps.Clone(*r.members.Load())
	if addr == "" {
		delete(m, id)
	} else {
		m[id] = addr
	}
	r.members.Store(&m)
}

// memberAddr returns the client address of node id, or "".
func (r *Raft) memberAddr(id string) string { return (*r.members.Load())[id] }

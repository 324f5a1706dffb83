package replication

import (
	"slices"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// Relayed replies. PUBLISH and SPUBLISH reply how many subscribers received
// the message on the node the client is connected to, as Redis Cluster does,
// and each node delivers to its own subscribers as it applies the entry; the
// leader's reply counts the leader's. So the forwarder tags a request that
// holds one, the leader carries the tag into the log entry, and when this node
// applies that entry, its own reply (the leader's but for those counts: the
// rest is deterministic) answers the client. The request waits for it past
// the leader's answer, which comes first unless this node applied first. Its
// entry never reaches this node's state machine live if a snapshot held it:
// once this node's applied index reaches the leader's at its answer, or after
// forwardTimeout (a node cut off from the log), the leader's reply with counts
// of 0 answers it, which is true then of this node. Scripts are not relayed:
// what PUBLISH returns to them is the same on every node (keyspace.Replicated).

// relayed is a relayed request and, once the leader has answered it, the
// leader's reply, its scripts' calls and its applied index.
type relayed struct {
	req           *Request
	answered      bool
	leaderReply   keyspace.Reply
	leaderCalls   []luaexec.ScriptCall
	leaderApplied uint64
	timeout       *time.Timer
}

// countsSubscribers reports whether req holds a PUBLISH or SPUBLISH, whose
// reply depends on the node that serves it.
func countsSubscribers(req *Request) bool {
	return slices.ContainsFunc(req.Cmds, isPublish)
}

func isPublish(args [][]byte) bool {
	cmd := keyspace.Lookup(args[0])
	return cmd != nil && (cmd.Name == "publish" || cmd.Name == "spublish")
}

// tag gives the requests of batch that count subscribers a relay tag, tracks
// them until they are answered, and returns their numbers, 0 for the other
// requests, or nil if there is none.
//
// Once this node may apply a relayed request's entry, the request is no
// longer the sender's: the FSM may answer it, and its client reuse it, at
// any moment. The sender then goes by the numbers, and touches a relayed
// request only once it has claimed it (see owned).
func (f *forwarder) tag(batch []*Request) []uint64 {
	var seqs []uint64
	for i, req := range batch {
		if !countsSubscribers(req) {
			continue
		}
		f.relayMu.Lock()
		if seqs == nil {
			seqs = make([]uint64, len(batch))
		}
		if f.relays == nil {
			f.relays = make(map[uint64]*relayed)
		}
		f.relaySeq++
		seqs[i] = f.relaySeq
		req.relay = logcodec.RelayTag{Origin: f.r.origin, Seq: f.relaySeq}
		f.relays[f.relaySeq] = &relayed{req: req}
		f.relayMu.Unlock()
	}
	return seqs
}

// untag undoes tag for a batch that no leader has appended and that this
// node is about to propose itself.
func (f *forwarder) untag(batch []*Request, seqs []uint64) {
	f.relayMu.Lock()
	defer f.relayMu.Unlock()
	for i, seq := range seqs {
		if seq != 0 {
			delete(f.relays, seq)
			batch[i].relay = logcodec.RelayTag{}
		}
	}
}

// owned returns the requests of batch, whose relay numbers are seqs, that
// are still the sender's to answer: all but the relayed ones that this node
// answered as it applied their entries. It claims the relayed ones.
func (f *forwarder) owned(batch []*Request, seqs []uint64) []*Request {
	if seqs == nil {
		return batch
	}
	out := make([]*Request, 0, len(batch))
	f.relayMu.Lock()
	defer f.relayMu.Unlock()
	for i, req := range batch {
		if seqs[i] == 0 || f.claimLocked(seqs[i]) != nil {
			out = append(out, req)
		}
	}
	return out
}

// claim stops tracking relayed request seq and returns it, for its caller to
// answer; nil if another has claimed it.
func (f *forwarder) claim(seq uint64) *relayed {
	f.relayMu.Lock()
	defer f.relayMu.Unlock()
	return f.claimLocked(seq)
}

func (f *forwarder) claimLocked(seq uint64) *relayed {
	rl := f.relays[seq]
	if rl == nil {
		return nil
	}
	delete(f.relays, seq)
	if rl.answered {
		f.waiting.Add(-1)
	}
	if rl.timeout != nil {
		rl.timeout.Stop()
	}
	return rl
}

// awaitApply keeps relayed request seq, which the leader answered with
// reply (its scripts having called calls) once its applied index was
// leaderApplied, until this node applies the request's entry or passes that
// index.
func (f *forwarder) awaitApply(seq uint64, reply keyspace.Reply, calls []luaexec.ScriptCall, leaderApplied uint64) {
	f.relayMu.Lock()
	rl := f.relays[seq]
	if rl == nil { // this node applied the entry first and answered
		f.relayMu.Unlock()
		return
	}
	rl.answered, rl.leaderReply, rl.leaderCalls, rl.leaderApplied = true, reply, calls, leaderApplied
	// Counted before the applied index is read, and passed reads them in the
	// other order, so that one of the two sees the other.
	f.waiting.Add(1)
	if f.r.applied.Load() < leaderApplied {
		rl.timeout = time.AfterFunc(forwardTimeout, func() { f.skipped(f.claim(seq)) })
		f.relayMu.Unlock()
		return
	}
	rl = f.claimLocked(seq)
	f.relayMu.Unlock()
	f.skipped(rl)
}

// appliedHere answers relayed request seq with this node's reply to its
// entry, whose scripts called calls (valid during the call). The FSM calls
// it.
func (f *forwarder) appliedHere(seq uint64, reply keyspace.Reply, calls []luaexec.ScriptCall) {
	if rl := f.claim(seq); rl != nil {
		rl.req.Calls = append(rl.req.Calls[:0], calls...)
		rl.req.finish(reply)
	}
}

// passed answers the relayed requests, answered by the leader, whose entries
// this node has not applied live though its applied index reached the
// leader's. The FSM calls it with its new applied index.
func (f *forwarder) passed(applied uint64) {
	if f.waiting.Load() == 0 {
		return
	}
	var done []*relayed
	f.relayMu.Lock()
	for seq, rl := range f.relays {
		if rl.answered && rl.leaderApplied <= applied {
			done = append(done, f.claimLocked(seq))
		}
	}
	f.relayMu.Unlock()
	for _, rl := range done {
		f.skipped(rl)
	}
}

// skipped answers a claimed relayed request (nil: nothing to do) whose entry
// this node has not applied live: with the leader's reply, counting none of
// this node's subscribers, which have received nothing.
func (f *forwarder) skipped(rl *relayed) {
	if rl != nil {
		rl.req.Calls = rl.leaderCalls
		rl.req.finish(withoutDeliveries(rl.req, rl.leaderReply))
	}
}

// withoutDeliveries returns reply, the reply to req, with 0 as the count of
// each of its PUBLISH and SPUBLISH commands.
func withoutDeliveries(req *Request, reply keyspace.Reply) keyspace.Reply {
	if !req.Multi {
		if reply.Kind == keyspace.KindInt {
			return keyspace.Zero
		}
		return reply
	}
	if reply.Kind != keyspace.KindArray || len(reply.Elems) != len(req.Cmds) {
		return reply // an EXEC that a WATCH aborted
	}
	elems := slices.Clone(reply.Elems)
	for i, args := range req.Cmds {
		if isPublish(args) && elems[i].Kind == keyspace.KindInt {
			elems[i] = keyspace.Zero
		}
	}
	return keyspace.Array(elems...)
}

package replication

import (
	"sync/atomic"

	"github.com/lockserver/lockserver/keyspace"
)

// Linearizable reads. A read on the leader runs on the state machine at its
// place among this node's proposals: at once if none is in flight, else
// right after the proposal before it is applied (appliedLocal). It is
// answered once a VerifyLeader round that began after it arrived confirms
// that this node still leads, in the term it was accepted in (verifyLoop).
// A new leader's first entry is a barrier (leadingLocked): reads queue behind
// it, so that nothing is read before every entry of earlier terms is applied.

// readOp is a read that is answered once it has run on the state machine and a
// VerifyLeader round has covered it, whichever comes last.
type readOp struct {
	req   *Request
	term  uint64       // the leader term it was accepted in
	left  atomic.Int32 // 2, then 1, then 0 when it is answered
	reply keyspace.Reply
	fail  string // set when the verification failed
}

// read runs a read request on the state machine. smMu is held.
func (r *Raft) read(req *Request) keyspace.Reply {
	if req.WatchKeys != nil {
		return versionsReply(r.sm.Load().versions(req.DB, req.WatchKeys))
	}
	sm := r.sm.Load()
	sm.record(true)
	reply := sm.readAs(req.DB, req.Cmds, req.Multi, req.Watch, r.clock.Now(), req.User)
	req.Denials, req.Calls = sm.takeDenials(), append(req.Calls[:0], sm.calls()...)
	return reply
}

// verifyLoop confirms leadership for the reads waiting at the start of each
// round: one VerifyLeader round serves them all.
func (r *Raft) verifyLoop() {
	for {
		select {
		case <-r.verifier.wake:
		case <-r.stop:
			for _, rd := range r.verifier.take() {
				r.readVerified(rd, errClosed)
			}
			return
		}
		reads := r.verifier.take()
		if len(reads) == 0 {
			continue
		}
		err := r.raft.VerifyLeader().Error()
		// The round confirms the term it ran in; a read accepted in an earlier
		// term may have run on a state that misses what another leader wrote.
		term := r.raft.CurrentTerm()
		for _, rd := range reads {
			switch {
			case err != nil || rd.term != term:
				r.readVerified(rd, errTryAgain)
			default:
				r.readVerified(rd, "")
			}
		}
	}
}

func (r *Raft) readRan(rd *readOp, reply keyspace.Reply) {
	rd.reply = reply
	if rd.left.Add(-1) == 0 {
		r.answerRead(rd)
	}
}

func (r *Raft) readVerified(rd *readOp, fail string) {
	rd.fail = fail
	if rd.left.Add(-1) == 0 {
		r.answerRead(rd)
	}
}

func (r *Raft) answerRead(rd *readOp) {
	if rd.fail != "" {
		rd.req.finish(keyspace.Error(rd.fail))
		return
	}
	rd.req.finish(rd.reply)
}

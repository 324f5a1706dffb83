package replication

import (
	"sync/atomic"

	"github.com/lockserver/lockserver/keyspace"
)

// Linearizable reads. A read on the leader runs on the state machine at its
// place among this node's proposals (readPlace): at once if none it must
// follow is unapplied, else right after the proposal before it is applied
// (appliedLocal). It is answered once a VerifyLeader round that began after
// it arrived confirms that this node still leads, in the term it was
// accepted in (verifyLoop). A new leader's first entry is a barrier
// (leadingLocked): reads queue behind it, so that nothing is read before
// every entry of earlier terms is applied.
//
// A request that may write (keyspace.MayWrite: a lock script, SET NX) runs
// the same way, dry: what writes nothing is answered as a read, with no log
// entry; a run that reaches a write is abandoned, having changed nothing,
// and the request goes to the log.

// readOp is a read that is answered once it has run on the state machine and a
// VerifyLeader round has covered it, whichever comes last.
type readOp struct {
	req   *Request
	term  uint64       // the leader term it was accepted in
	dry   bool         // a dry run of a request that may write
	left  atomic.Int32 // 2, then 1, then 0 when it is answered
	reply keyspace.Reply
	fail  string // set when the verification failed
}

// read runs a read request, or a dry run, on the state machine. smMu is held.
func (r *Raft) read(rd *readOp) keyspace.Reply {
	req := rd.req
	if req.WatchKeys != nil {
		return versionsReply(r.sm.Load().versions(req.DB, req.WatchKeys))
	}
	sm := r.sm.Load()
	sm.record(true)
	var reply keyspace.Reply
	if rd.dry {
		reply = sm.dryRun(req, r.clock.Now())
	} else {
		reply = sm.readAs(req.DB, req.Cmds, req.Multi, req.Watch, r.clock.Now(), req.User)
	}
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

// readRan records what the run of rd answered. A dry run that reached a
// write goes to the log now, whatever the leadership round finds: the log
// decides. Runs at their place are called under smMu, where nothing may
// propose.
func (r *Raft) readRan(rd *readOp, reply keyspace.Reply) {
	rd.reply = reply
	if reply.IsWouldWrite() {
		rd.req.dryFailed = true
		go r.submit(rd.req, false)
	}
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
	if rd.reply.IsWouldWrite() {
		return // submitted to the log by readRan
	}
	if rd.fail != "" {
		rd.req.finish(keyspace.Error(rd.fail))
		return
	}
	rd.req.finish(rd.reply)
}

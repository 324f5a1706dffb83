package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// forwarder sends the requests a follower's clients submit to the leader, in
// submission order: one batch at a time, each batch as one LOCKSERVER FORWARD
// command, so that many concurrent requests cost one round trip.
type forwarder struct {
	r    *Raft
	wake chan struct{}

	// mu and relayMu are never held together, and are taken last (see the
	// lock order on Raft).
	mu      sync.Mutex
	queue   []*Request
	sending bool // a batch is on its way and not answered
	closed  bool
	// to is the leader the batch on its way went to, and abandon cancels the
	// call that carries it (see leaderChanged); abandoned says it was called.
	to        string
	abandon   context.CancelFunc
	abandoned bool

	// relays are the forwarded requests that this node answers itself (see
	// Relayed replies), by their seq, from when they are tagged until answered;
	// waiting counts those the leader has answered.
	relayMu  sync.Mutex
	relays   map[uint64]*relayed
	relaySeq uint64
	waiting  atomic.Int32
}

// Bounds of one forwarded batch.
const (
	maxForwardBatch      = 1024
	maxForwardBatchBytes = 4 << 20
	// forwardTimeout bounds the wait for a forwarded batch's replies; the
	// leader answers within an election timeout or steps down, so it is only
	// reached if the leader hangs.
	forwardTimeout = 30 * time.Second
)

func newForwarder(r *Raft) *forwarder {
	return &forwarder{r: r, wake: make(chan struct{}, 1)}
}

// busy reports whether requests wait to be forwarded or are being forwarded.
func (f *forwarder) busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sending || len(f.queue) > 0
}

func (f *forwarder) enqueue(req *Request) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		req.finish(keyspace.Error(errClosed))
		return
	}
	f.queue = append(f.queue, req)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// next takes the next batch, or reports that the queue is empty.
func (f *forwarder) next() []*Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, size := 0, 0
	for n < len(f.queue) && n < maxForwardBatch && (n == 0 || size < maxForwardBatchBytes) {
		size += logcodec.CmdsSize(f.queue[n].Cmds)
		n++
	}
	batch := append([]*Request(nil), f.queue[:n]...)
	f.queue = f.queue[n:]
	f.sending = n > 0
	return batch
}

func (f *forwarder) loop() {
	for {
		select {
		case <-f.wake:
		case <-f.r.stop:
			return
		}
		for batch := f.next(); len(batch) > 0; batch = f.next() {
			sent := time.Now()
			f.send(batch)
			f.hold(len(batch), time.Since(sent))
		}
	}
}

// hold waits, as the leader does between its batches (see steppedHold), for
// the clients of the batch just answered to queue their next requests, so
// that they go in the next batch rather than a round trip after it: until
// answered more requests are queued than when it began, or until a step of
// the hold passes with no request queued, at most the round trip (took).
func (f *forwarder) hold(answered int, took time.Duration) {
	f.mu.Lock()
	seen := len(f.queue)
	f.mu.Unlock()
	want := seen + answered
	h := newHold(time.Now(), took, seen)
	timer := time.NewTimer(h.step)
	defer timer.Stop()
	for {
		f.mu.Lock()
		n := len(f.queue)
		f.mu.Unlock()
		if n >= want || n >= maxForwardBatch {
			return
		}
		select {
		case <-f.wake:
		case <-timer.C:
			next := h.next(time.Now(), n)
			if next == 0 {
				return
			}
			timer.Reset(next)
		case <-f.r.stop:
			return
		}
	}
}

// close answers whatever is still queued, and the relayed requests that wait
// for entries this node will not apply now; the loop has stopped.
func (f *forwarder) close() {
	f.mu.Lock()
	queue := f.queue
	f.queue, f.closed = nil, true
	f.mu.Unlock()
	f.finishAll(queue, keyspace.Error(errClosed))
	f.relayMu.Lock()
	var left []*relayed
	for seq := range f.relays {
		left = append(left, f.claimLocked(seq))
	}
	f.relayMu.Unlock()
	for _, rl := range left {
		if !rl.answered { // not expected: send answers its whole batch
			rl.req.finish(keyspace.Error(errUnknownClose))
			continue
		}
		f.skipped(rl)
	}
}

// send delivers a batch to the leader and answers its requests. While no
// leader is reachable and nothing was sent it retries, for up to forwardWait.
func (f *forwarder) send(batch []*Request) {
	r := f.r
	deadline := time.Now().Add(r.opts.forwardWait)
	var payload []byte
	// seqs are the relay numbers of the batch's requests, 0 for those not
	// relayed, or nil if none is (see tag); set with payload.
	var seqs []uint64
	lastErr := "no leader"
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		leader, addr := r.leaderLink()
		switch {
		case leader == "":
		case leader == r.opts.NodeID:
			// This node leads now and answers its own proposals.
			if seqs != nil {
				f.untag(batch, seqs)
				payload, seqs = nil, nil
			}
			if r.submitBatch(batch) {
				return
			}
		default:
			if payload == nil {
				seqs = f.tag(batch)
				payload = encodeForward(batch)
			}
			sent := time.Now()
			res, abandoned, err := f.call(leader, addr, payload)
			if !errors.Is(err, memberlink.ErrNotSent) {
				f.r.metrics.forwarded.Add(int64(len(batch)))
				f.r.metrics.forward.Observe(int64(time.Since(sent)))
			}
			rerr, refused := keyspace.ReplyOf(err)
			switch {
			case err == nil:
				f.answer(batch, seqs, res)
				return
			case retryable(err):
				lastErr = fmt.Sprintf("leader %s at %s: %v", leader, addr, err)
			case abandoned:
				r.log.Warn("gave up on a forwarded batch: another node leads now", "leader", leader, "addr", addr)
				for _, req := range f.owned(batch, seqs) {
					req.finish(f.unknown(req, "leader "+leader+" was replaced before it answered"))
				}
				return
			case refused:
				// The leader refused the FORWARD command itself (NOAUTH, ...).
				r.log.Error("the leader refused forwarded commands", "leader", leader, "addr", addr, "err", err)
				f.finishAll(f.owned(batch, seqs), keyspace.Error("ERR forwarding to the leader failed: "+rerr.Str))
				return
			default:
				r.log.Warn("forwarding to the leader failed after sending", "leader", leader, "addr", addr, "err", err)
				for _, req := range f.owned(batch, seqs) {
					req.finish(f.unknown(req, "the connection to the leader failed after the command was forwarded"))
				}
				return
			}
		}
		if time.Now().After(deadline) {
			f.finishAll(f.owned(batch, seqs), keyspace.Error(errClusterDown+" ("+lastErr+")"))
			return
		}
		select {
		case <-time.After(backoff):
		case <-r.stop:
			f.finishAll(f.owned(batch, seqs), keyspace.Error(errClosed))
			return
		}
	}
}

// call sends a batch to leader at addr and returns the reply, whether the call
// was abandoned because another node leads now, and the error.
func (f *forwarder) call(leader, addr string, payload []byte) (res string, abandoned bool, err error) {
	ctx, cancel := context.WithTimeout(f.r.ctx, forwardTimeout)
	defer cancel()
	f.mu.Lock()
	f.to, f.abandon, f.abandoned = leader, cancel, false
	f.mu.Unlock()
	// The leader may have changed before the call could be abandoned.
	f.leaderChanged()
	type reply struct {
		res string
		err error
	}
	// A peerClient need not stop waiting when ctx ends (go-redis only sets
	// deadlines from it).
	rep, ok := awaitOr(func() reply {
		res, err := f.r.peers.Call(ctx, addr, argLockserver, argForward, payload)
		return reply{res, err}
	}, ctx.Done())
	if !ok {
		rep.err = ctx.Err()
	}
	f.mu.Lock()
	abandoned = f.abandoned && rep.err != nil
	f.to, f.abandon, f.abandoned = "", nil, false
	f.mu.Unlock()
	return rep.res, abandoned, rep.err
}

// leaderChanged abandons the batch on its way if another node than the one
// it went to leads now. A deposed leader that hangs (a paused process, a
// partition that drops packets) may not answer for forwardTimeout, and every
// request of this node's waits behind the batch, even once this node leads.
// What the batch did is unknown; nothing of it can take effect after what the
// new leader appends next, since the deposed leader commits nothing more.
func (f *forwarder) leaderChanged() {
	id := f.r.leaderID()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.abandon != nil && id != "" && id != f.to {
		f.abandon()
		f.abandoned = true
	}
}

// answer relays the leader's replies to a batch whose relay numbers are
// seqs. A relayed request that succeeded waits for this node's own reply.
func (f *forwarder) answer(batch []*Request, seqs []uint64, res string) {
	leaderApplied, replies, calls, err := logcodec.DecodeForwardReply([]byte(res))
	if err == nil && len(replies) != len(batch) {
		err = fmt.Errorf("%d replies to %d requests", len(replies), len(batch))
	}
	if err != nil {
		f.r.log.Error("bad reply to a forwarded batch", "err", err)
		for _, req := range f.owned(batch, seqs) {
			req.finish(f.unknown(req, "the leader's reply could not be read"))
		}
		return
	}
	for i, req := range batch {
		switch {
		case seqs == nil || seqs[i] == 0:
			req.Calls = calls[i]
			req.finish(replies[i])
		case replies[i].Kind == keyspace.KindError: // nothing was applied
			if rl := f.claim(seqs[i]); rl != nil {
				rl.req.Calls = calls[i]
				rl.req.finish(replies[i])
			}
		default:
			f.awaitApply(seqs[i], replies[i], calls[i], leaderApplied)
		}
	}
}

func (f *forwarder) finishAll(batch []*Request, reply keyspace.Reply) {
	for _, req := range batch {
		req.finish(reply)
	}
}

// retryable reports whether a failed forward did nothing and may succeed on
// another try: it was not sent, or the receiver refused the whole batch
// because it does not lead.
func retryable(err error) bool {
	if rerr, ok := keyspace.ReplyOf(err); ok {
		return strings.HasPrefix(rerr.Str, "TRYAGAIN") || strings.HasPrefix(rerr.Str, "CLUSTERDOWN")
	}
	return errors.Is(err, memberlink.ErrNotSent)
}

// unknownOutcome is the reply to a forwarded request whose fate is unknown:
// UNKNOWN if it may write, TRYAGAIN if it only reads.
// unknown is unknownOutcome, counted in the metrics.
func (f *forwarder) unknown(req *Request, why string) keyspace.Reply {
	reply := unknownOutcome(req, why)
	if strings.HasPrefix(reply.Str, "UNKNOWN") {
		f.r.metrics.unknown.Add(1)
	}
	return reply
}

func unknownOutcome(req *Request, why string) keyspace.Reply {
	if readOnly(req) {
		return keyspace.Error(errTryAgain)
	}
	return keyspace.Error("UNKNOWN " + why + "; it may or may not have taken effect")
}

// readOnly reports whether req certainly does not write, by the command table
// as prepare reads it: no command in it (a container's subcommand, as it
// runs) writes or publishes, and none is a script, whose writes only running
// it would tell.
func readOnly(req *Request) bool {
	if req.WatchKeys != nil {
		return true
	}
	for _, args := range req.Cmds {
		cmd := keyspace.Lookup(args[0])
		if cmd != nil {
			cmd = cmd.Resolve(args)
		}
		if cmd == nil || cmd.Writes() || cmd.Has(keyspace.Scripting) {
			return false
		}
	}
	return true
}

// submitBatch submits requests that this node's forwarder holds, or that
// another node forwarded, if this node leads. Their proposals go to the log
// together: sent one by one, the first would leave alone and the rest wait
// for its commit. It reports false, having submitted nothing, if this node
// does not lead.
func (r *Raft) submitBatch(batch []*Request) bool {
	r.proposeMu.Lock()
	if !r.leadingLocked() {
		r.proposeMu.Unlock()
		return false
	}
	r.gathering++
	r.proposeMu.Unlock()
	for _, req := range batch {
		r.submit(req, true)
	}
	r.proposeMu.Lock()
	r.gathering--
	r.sendReadyLocked()
	r.proposeMu.Unlock()
	return true
}

// serveForward serves LOCKSERVER FORWARD: it submits the batch in order and
// answers with the encoded replies once all are in. A node that does not lead
// refuses the whole batch with TRYAGAIN, and the sender tries again. Whether
// memory is over maxmemory is the leader's to say, as for its own clients:
// the FORWARD request carries what this node's server found.
func (r *Raft) serveForward(req *Request, payload []byte) {
	batch, err := decodeForward(payload)
	if err != nil {
		req.finish(keyspace.Error("ERR " + err.Error()))
		return
	}
	for _, in := range batch {
		in.OverMemory = req.OverMemory
		in.start()
	}
	if !r.submitBatch(batch) {
		req.finish(keyspace.Error(errTryAgain))
		return
	}
	go func() {
		replies := make([]keyspace.Reply, len(batch))
		calls := make([][]luaexec.ScriptCall, len(batch))
		relayed := false
		for i, in := range batch {
			replies[i] = in.Wait(context.Background())
			calls[i] = in.Calls
			relayed = relayed || in.relay.Seq != 0
		}
		// The sender of relayed requests needs an applied index that their
		// entries do not exceed. Those applied were answered during the FSM's
		// batch that held them, which stores the applied index as it ends,
		// under smMu.
		var applied uint64
		if relayed {
			r.smMu.Lock()
			applied = r.applied.Load()
			r.smMu.Unlock()
			r.sendCommitIndex()
		}
		req.finish(keyspace.Bulk(string(logcodec.EncodeForwardReply(applied, replies, calls))))
	}()
}

// encodeForward encodes a batch of requests for LOCKSERVER FORWARD.
func encodeForward(batch []*Request) []byte {
	reqs := make([]logcodec.Request, len(batch))
	for i, r := range batch {
		reqs[i] = logcodec.Request{DB: r.DB, Cmds: r.Cmds, Multi: r.Multi, Watch: r.Watch, WatchKeys: r.WatchKeys, User: r.User, Relay: r.relay}
	}
	return logcodec.EncodeRequests(reqs)
}

// decodeForward decodes what encodeForward encoded. The requests' byte
// strings alias payload.
func decodeForward(payload []byte) ([]*Request, error) {
	reqs, err := logcodec.DecodeRequests(payload)
	if err != nil {
		return nil, err
	}
	batch := make([]*Request, len(reqs))
	for i, r := range reqs {
		batch[i] = &Request{DB: r.DB, Cmds: r.Cmds, Multi: r.Multi, Watch: r.Watch, WatchKeys: r.WatchKeys, User: r.User, relay: r.Relay}
	}
	return batch, nil
}

// sendCommitIndex makes the leader tell the followers its commit index now,
// for the sender of relayed requests to apply their entries and answer. A
// follower learns it from the next append, which an idle leader sends only
// after CommitTimeout (5 to 10 ms): so unless proposals are pending, which
// will carry it, an empty entry goes to the log.
func (r *Raft) sendCommitIndex() {
	r.proposeMu.Lock()
	defer r.proposeMu.Unlock()
	if len(r.pendingProps) == 0 && r.leadingLocked() {
		r.proposeLocked(&logcodec.LogEntry{Kind: logcodec.KindBarrier}, nil, false)
	}
}

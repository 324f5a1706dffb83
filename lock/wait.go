package lock

import (
	"context"
	"time"
)

// maxWait is the longest a waiter sleeps between tries with no message: a
// fallback for a message lost (a reconnection, a node that did not deliver
// it), never a poll. It is also how often a Mutex waiter renews its place
// in the queue.
const maxWait = queueLease / 3

// A try is the outcome of one attempt to acquire.
type try struct {
	acquired bool
	// wait is how long until the attempt is worth making again with no
	// message: the holder's lease left; negative for unknown.
	wait time.Duration
	// first is the holder the server names first in line (a Mutex's queue):
	// the next one after an acquisition, the one whose turn it is when free.
	first string
	free  bool
}

// waitFor calls attempt until it acquires, sleeping between tries until a
// message on channel or the fallback timer wakes it. A holder id joins the
// Mutex protocol: a message on channel wakes one waiter, the one first in
// line, and an unlock may hand the lock over on handOver, calling handed
// with its token; with "" every message wakes every waiter. When ctx is
// done, or attempt fails, abandon is called to undo what an attempt whose
// outcome is unknown, or a hand-over not yet heard of, may have done.
func (b *Backend) waitFor(ctx context.Context, channel, handOverChannel, id, wait string, attempt func() (try, error), handed func(token uint64), abandon func()) error {
	n := b.notifier()
	kind := wakeAll
	if id != "" {
		kind = wakeOne
	}
	// Join first if the subscriptions are live: no message published after
	// the attempt below can then pass this waiter by. The hand-over channel
	// comes first, so that the unlock channel's confirmation, which follows
	// its own on the one connection, says that both are live.
	var h *waiter
	hLive := false
	if handOverChannel != "" {
		h, hLive = n.join(handOverChannel, id, wait, handOver, false)
	}
	w, live := n.join(channel, id, "", kind, false)
	defer func() { n.leave(w); n.leave(h) }()
	for {
		r, err := attempt()
		if err != nil {
			abandon()
			return err
		}
		if r.acquired {
			if w != nil && kind == wakeOne {
				n.first(w, r.first, false)
			}
			return nil
		}
		if h == nil && handOverChannel != "" {
			if h, hLive = n.join(handOverChannel, id, wait, handOver, true); h == nil {
				return errClosed
			}
		}
		if w == nil {
			if w, live = n.join(channel, id, "", kind, true); w == nil {
				return errClosed
			}
		}
		if kind == wakeOne {
			n.first(w, r.first, r.free)
		}
		d := maxWait
		if r.wait >= 0 && r.wait < d {
			d = r.wait
		}
		var ready <-chan struct{}
		switch {
		case !live:
			ready = w.ch.ready
		case h != nil && !hLive:
			ready = h.ch.ready
		}
		var handedOver <-chan struct{}
		if h != nil {
			handedOver = h.wake
		}
		t := time.NewTimer(d)
		select {
		case <-w.wake:
		case <-handedOver:
			if token := h.handed.Load(); token != 0 {
				t.Stop()
				handed(token)
				return nil
			}
		case <-ready:
			// Subscribed (the hand-over channel before the unlock
			// channel): a message from now on reaches this waiter, but one
			// may have come since the attempt, so try again now.
			live, hLive = true, true
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			abandon()
			return ctx.Err()
		}
		t.Stop()
	}
}

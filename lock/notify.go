package lock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The notifier is a Backend's one subscription: it subscribes to the
// channels that its waiters wait on and wakes them when a message comes.
//
// A waiter joins before it tries the lock when its channel's subscription
// is already live (the server confirmed it), so no message published after
// its try can pass it by; otherwise it joins after a failed try and tries
// again once the subscription is live. A message that wakes one waiter
// ("0" on a Mutex's channel, RedissonLock's unlock message) goes to the
// waiter the server last named as first in line, when it is here, or to the
// one here that joined first; any other message wakes every waiter of the
// channel. When the connection breaks, messages may have been missed, so
// every waiter is woken to try again.

// idleChannel is how long a channel no one waits on stays subscribed, so that
// a lock contended now and then does not subscribe each time.
const idleChannel = 30 * time.Second

// receiveTimeout is how long the subscriber reads before it pings, so that a
// dead connection is noticed.
const receiveTimeout = 5 * time.Second

type notifier struct {
	ps *redis.PubSub

	mu       sync.Mutex
	channels map[string]*channel
	closed   bool
	running  bool
	dropped  time.Time // when dropIdle last ran
}

// How a channel's messages wake its waiters.
type wakeKind int

const (
	wakeAll  wakeKind = iota // every message wakes every waiter
	wakeOne                  // "0" wakes one waiter (a Mutex's unlock channel)
	handOver                 // "<id> <wait> <token>" hands the lock to waiter id, in its wait
)

// A channel is the state of one subscribed channel.
type channel struct {
	name    string
	kind    wakeKind
	ready   chan struct{} // closed when the server confirms the subscription
	live    bool
	waiters []*waiter // in the order they joined
	next    string    // the holder the server last named first in line
	idle    time.Time // when the last waiter left
}

// A waiter is one caller waiting for a channel's messages.
type waiter struct {
	id     string // holder id ("" for a waiter that is not in a queue)
	wait   string // on a hand-over channel, the id of this wait
	ch     *channel
	wake   chan struct{} // one pending wake-up at most
	handed atomic.Uint64 // the token of a lock handed over to it, or 0
}

func newNotifier(ps *redis.PubSub) *notifier {
	return &notifier{ps: ps, channels: map[string]*channel{}}
}

// join adds a waiter for name. With subscribe false it joins only if the
// subscription is live, returning nil otherwise. live reports that it was.
func (n *notifier) join(name, id, wait string, kind wakeKind, subscribe bool) (w *waiter, live bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, false
	}
	c := n.channels[name]
	if c == nil {
		if !subscribe {
			return nil, false
		}
		c = &channel{name: name, kind: kind, ready: make(chan struct{})}
		n.channels[name] = c
		// Subscribe only writes the command; the confirmation comes to run.
		n.ps.Subscribe(context.Background(), name)
		if !n.running {
			n.running = true
			go n.run()
		}
	} else if !c.live && !subscribe {
		return nil, false
	}
	w = &waiter{id: id, wait: wait, ch: c, wake: make(chan struct{}, 1)}
	c.waiters = append(c.waiters, w)
	return w, c.live
}

// leave removes w; nil is allowed.
func (n *notifier) leave(w *waiter) {
	if w == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := w.ch
	for i, o := range c.waiters {
		if o == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			break
		}
	}
	if len(c.waiters) == 0 {
		c.idle = time.Now()
	}
}

// first tells the notifier which holder the server names first in line on
// w's channel; if that holder waits here and the lock is free, it is woken.
func (n *notifier) first(w *waiter, id string, free bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.ch.next = id
	if free && id != w.id {
		for _, o := range w.ch.waiters {
			if o.id == id {
				o.poke()
				return
			}
		}
	}
}

// poke wakes w unless a wake-up is already pending.
func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run reads the subscription until the notifier is closed.
func (n *notifier) run() {
	ctx := context.Background()
	backoff := 10 * time.Millisecond
	broken := false
	for {
		msg, err := n.ps.ReceiveTimeout(ctx, receiveTimeout)
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return
		}
		if err != nil {
			if isTimeout(err) {
				n.dropIdle()
				n.mu.Unlock()
				n.ps.Ping(ctx)
				continue
			}
			if !broken {
				// Whatever was published meanwhile is lost to us.
				broken = true
				for _, c := range n.channels {
					c.wakeAll()
				}
			}
			n.mu.Unlock()
			time.Sleep(jitter(backoff))
			backoff = min(2*backoff, time.Second)
			continue
		}
		broken, backoff = false, 10*time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if c := n.channels[m.Channel]; c != nil && m.Kind == "subscribe" {
				if c.live {
					// Subscribed again after a reconnection.
					c.wakeAll()
				} else {
					c.live = true
					close(c.ready)
				}
			}
		case *redis.Message:
			if c := n.channels[m.Channel]; c != nil {
				c.deliver(m.Payload)
			}
		}
		if time.Since(n.dropped) > idleChannel {
			n.dropIdle()
		}
		n.mu.Unlock()
	}
}

// deliver wakes the waiters a message is for.
func (c *channel) deliver(payload string) {
	if c.kind == handOver {
		f := strings.Fields(payload)
		if len(f) != 3 {
			return
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		for _, w := range c.waiters {
			if w.id == f[0] && w.wait == f[1] && err == nil && n > 0 {
				w.handed.Store(n)
				w.poke()
			}
		}
		return
	}
	if c.kind != wakeOne || payload != "0" {
		c.wakeAll()
		return
	}
	for _, w := range c.waiters {
		if w.id == c.next {
			w.poke()
			return
		}
	}
	if len(c.waiters) > 0 {
		c.waiters[0].poke()
	}
}

func (c *channel) wakeAll() {
	for _, w := range c.waiters {
		w.poke()
	}
}

// dropIdle unsubscribes from channels no one has waited on for a while;
// only live ones, so that a confirmation still to come is never taken for a
// later subscription's.
func (n *notifier) dropIdle() {
	var names []string
	for name, c := range n.channels {
		if c.live && len(c.waiters) == 0 && time.Since(c.idle) > idleChannel {
			delete(n.channels, name)
			names = append(names, name)
		}
	}
	n.dropped = time.Now()
	if len(names) > 0 {
		n.ps.Unsubscribe(context.Background(), names...)
	}
}

func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	for _, c := range n.channels {
		c.wakeAll()
	}
	n.mu.Unlock()
	n.ps.Close()
}

// isTimeout reports a read that timed out with nothing to read.
func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

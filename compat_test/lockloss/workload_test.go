package lockloss

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The workload of the lock-loss test: workers take and release locks on a
// few contended keys through go-redis, with Redisson's scripts and with SET NX
// PX plus compare-and-delete, and every operation goes into a history that
// porcupine checks against lockModel. The same workload runs against a
// lockserver cluster and against a Redis master and replica.

// lockOpTimeout bounds one operation. It is longer than a lockserver
// follower's wait for a leader (3 s), so that a cluster without a leader
// answers CLUSTERDOWN before the client gives up.
const lockOpTimeout = 5 * time.Second

// lockKey is a contended key and the style its lock is taken in.
type lockKey struct {
	name  string
	style lockStyle
}

// lockScripts are the specification's lock scripts, which go-redis sends with
// EVALSHA and, on NOSCRIPT, EVAL.
type lockScripts struct {
	lock, unlock, cad *redis.Script
}

func newLockScripts(t testing.TB) lockScripts {
	return lockScripts{
		lock:   redis.NewScript(lockscripts.MustSource(t, "redisson_lock.lua")),
		unlock: redis.NewScript(lockscripts.MustSource(t, "redisson_unlock_v2.lua")),
		cad:    redis.NewScript(lockscripts.MustSource(t, "compare_and_delete.lua")),
	}
}

// lockClient opens a go-redis client that never retries on its own: a
// retried script could apply twice, and each attempt must be in the history.
func lockClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, PoolSize: 1, DialerRetries: 1,
		DialTimeout: time.Second, ReadTimeout: lockOpTimeout, WriteTimeout: lockOpTimeout,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// run sends op and returns its outcome in the model's words; for a read, also
// the state read. An error reply that no client expects is returned as err.
func (s lockScripts) run(c *redis.Client, op lockOp, lease time.Duration) (res lockResult, read lockState, err error) {
	ctx := context.Background()
	leaseMs := lease.Milliseconds()
	var reply string
	var v any
	switch {
	case op.Kind == opAcquire && op.Style == styleRedisson:
		v, err = s.lock.Run(ctx, c, []string{op.Key}, leaseMs, op.Owner).Result()
		if _, isInt := v.(int64); isInt {
			reply = replyHeld
		}
		if errors.Is(err, redis.Nil) {
			reply = replyAcquired
		}
	case op.Kind == opAcquire:
		v, err = c.SetArgs(ctx, op.Key, op.Owner, redis.SetArgs{Mode: "NX", TTL: lease}).Result()
		if v == "OK" {
			reply = replyAcquired
		}
		if errors.Is(err, redis.Nil) {
			reply = replyHeld
		}
	case op.Kind == opRelease && op.Style == styleRedisson:
		channel := "redisson_lock__channel:{" + op.Key + "}"
		v, err = s.unlock.Run(ctx, c, []string{op.Key, channel}, "0", leaseMs, op.Owner).Result()
		switch {
		case errors.Is(err, redis.Nil):
			reply = replyNotOwner
		case v == int64(0):
			reply = replyStill
		case v == int64(1):
			reply = replyReleased
		}
	case op.Kind == opRelease:
		v, err = s.cad.Run(ctx, c, []string{op.Key}, op.Owner).Result()
		switch v {
		case int64(0):
			reply = replyNotOwner
		case int64(1):
			reply = replyReleased
		}
	case op.Style == styleRedisson:
		var h map[string]string
		if h, err = c.HGetAll(ctx, op.Key).Result(); err == nil {
			v = h
			read, reply = hashLockState(h)
		}
	default:
		var val string
		val, err = c.Get(ctx, op.Key).Result()
		switch {
		case errors.Is(err, redis.Nil):
			reply = replyFree
		case err == nil:
			v = val
			read = lockState{Owner: val, Count: 1}
			reply = readReplyOf(read)
		}
	}
	outcome, unexpected := outcomeOf(err)
	if outcome == outcomeOK && reply == "" {
		unexpected = fmt.Errorf("unexpected reply %#v", v)
	}
	return lockResult{Outcome: outcome, Reply: reply}, read, unexpected
}

// hashLockState reads a Redisson lock's hash: owner -> hold count.
func hashLockState(h map[string]string) (lockState, string) {
	if len(h) == 1 {
		for owner, count := range h {
			n, err := strconv.Atoi(count)
			if err == nil {
				s := lockState{Owner: owner, Count: n}
				return s, readReplyOf(s)
			}
		}
	}
	if len(h) == 0 {
		return lockState{}, replyFree
	}
	// Not a state the model has: the reply says what was there.
	var fields []string
	for owner, count := range h {
		fields = append(fields, owner+"="+count)
	}
	sort.Strings(fields)
	return lockState{}, "hash " + strings.Join(fields, ",")
}

// outcomeOf classifies an error from go-redis. Error replies that say nothing
// was written, and commands that never left the client, failed; UNKNOWN
// replies, timeouts and broken connections may or may not have taken effect.
// Any other error reply is unexpected, and reported.
func outcomeOf(err error) (lockOutcome, error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return outcomeOK, nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"TRYAGAIN ", "CLUSTERDOWN ", "READONLY ", "LOADING ", "MASTERDOWN "} {
			if strings.HasPrefix(msg, p) {
				return outcomeFail, nil
			}
		}
		switch {
		case strings.HasPrefix(msg, "UNKNOWN "):
			return outcomeUnknown, nil
		case strings.HasSuffix(msg, "; nothing was written"):
			return outcomeFail, nil
		}
		return outcomeUnknown, fmt.Errorf("unexpected error reply: %w", err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) {
		return outcomeFail, nil
	}
	return outcomeUnknown, nil
}

// holdSpan is a time during which a client knew it held a lock: from the
// reply that told it so to the call of its release.
type holdSpan struct {
	key, owner string
	from, to   int64
}

// lockHistory is the record of one run, in nanoseconds since its start.
type lockHistory struct {
	start time.Time

	mu      sync.Mutex
	ops     []porcupine.Operation
	holds   []holdSpan
	clients int
}

func newLockHistory() *lockHistory { return &lockHistory{start: time.Now()} }

func (h *lockHistory) now() int64 { return int64(time.Since(h.start)) }

// newClient returns a fresh porcupine client id. A worker takes one after an
// operation with an unknown outcome, which stays open to the end of the
// history, so that each id's operations stay sequential.
func (h *lockHistory) newClient() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients++
	return h.clients - 1
}

func (h *lockHistory) add(client int, op lockOp, call int64, res lockResult, ret int64) {
	if res.Outcome == outcomeUnknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: op, Call: call, Output: res, Return: ret})
}

func (h *lockHistory) hold(s holdSpan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, s)
}

// heldLock is a lock acknowledged to a client and not yet released by it.
type heldLock struct {
	key   string
	style lockStyle
	owner string
	call  int64 // history time of the acquire's call: the lease began at or after it
	lease time.Duration
	// expiring locks have leases shorter than the run: they are outside the
	// model, and reading them adds nothing to the history.
	expiring bool
}

// heldLocks are the locks clients hold now. While frozen, no client starts a
// release, so that a fault's check finds every lock of its snapshot held.
type heldLocks struct {
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	locks  map[[2]string]heldLock // by key and owner
	pinned []heldLock             // never released
}

func newHeldLocks() *heldLocks {
	h := &heldLocks{locks: map[[2]string]heldLock{}}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *heldLocks) add(l heldLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.locks[[2]string{l.key, l.owner}] = l
}

func (h *heldLocks) pin(l heldLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pinned = append(h.pinned, l)
}

// unpin forgets pinned locks found lost, so that each loss counts once.
func (h *heldLocks) unpin(keys map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.pinned[:0]
	for _, l := range h.pinned {
		if !keys[l.key] {
			kept = append(kept, l)
		}
	}
	h.pinned = kept
}

// release forgets owner's lock on key before the owner releases it, waiting
// while frozen.
func (h *heldLocks) release(key, owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.frozen {
		h.cond.Wait()
	}
	delete(h.locks, [2]string{key, owner})
}

// freeze stops releases and returns every lock held now.
func (h *heldLocks) freeze() []heldLock {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen = true
	return h.snapshotLocked()
}

func (h *heldLocks) snapshot() []heldLock {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snapshotLocked()
}

func (h *heldLocks) snapshotLocked() []heldLock {
	all := append([]heldLock(nil), h.pinned...)
	for _, l := range h.locks {
		all = append(all, l)
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].key < all[j].key || all[i].key == all[j].key && all[i].owner < all[j].owner
	})
	return all
}

func (h *heldLocks) thaw() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen = false
	h.cond.Broadcast()
}

// lockRun is one run of the workload against one system.
type lockRun struct {
	t       *testing.T
	name    string
	hist    *lockHistory
	held    *heldLocks
	scripts lockScripts
	lease   time.Duration
	keys    []lockKey
	// addrs returns the servers a client may use now, in the order it tries them.
	addrs func() []string

	mu      sync.Mutex
	clients map[string]*redis.Client // the controller's own, by address
	stop    chan struct{}
	wg      sync.WaitGroup
	pins    int
}

func newLockRun(t *testing.T, name string, keysPerStyle int, lease time.Duration, addrs func() []string) *lockRun {
	r := &lockRun{
		t: t, name: name, hist: newLockHistory(), held: newHeldLocks(), scripts: newLockScripts(t),
		lease: lease, addrs: addrs, clients: map[string]*redis.Client{}, stop: make(chan struct{}),
	}
	for i := range keysPerStyle {
		r.keys = append(r.keys, lockKey{fmt.Sprintf("lockloss:redisson:%d", i), styleRedisson},
			lockKey{fmt.Sprintf("lockloss:setnx:%d", i), styleSetNX})
	}
	t.Cleanup(func() {
		r.stopWorkers()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.clients {
			c.Close()
		}
	})
	return r
}

// client returns the controller's client for addr.
func (r *lockRun) client(addr string) *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.clients[addr]
	if c == nil {
		c = lockClient(addr)
		r.clients[addr] = c
	}
	return c
}

// startWorkers starts n workers, spread over the servers, seeded from seed.
func (r *lockRun) startWorkers(n int, seed uint64) {
	runID := fmt.Sprintf("%08x", rand.New(rand.NewPCG(seed, 7)).Uint32())
	for i := range n {
		w := &lockWorker{
			run: r, rng: rand.New(rand.NewPCG(seed, uint64(i))), client: r.hist.newClient(),
			owner: fmt.Sprintf("%s-%s:%d", runID, r.name, i+1), id: i, server: i,
			conns: map[string]*redis.Client{}, maybe: map[string]map[string]int64{},
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer w.close()
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				w.cycle()
				// A pause between locks, as an application does some work;
				// it keeps Redis's history to a size porcupine checks quickly.
				time.Sleep(time.Duration(w.rng.IntN(2000)) * time.Microsecond)
			}
		}()
	}
}

// stopWorkers stops the workers once they have released what they hold.
func (r *lockRun) stopWorkers() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.held.thaw() // if a check failed while frozen
	r.wg.Wait()
}

// pinLocks takes n fresh locks at once, each through one of addrs at random,
// and keeps them to the end of the run: they are in every later fault's
// snapshot. It returns how many were acknowledged.
func (r *lockRun) pinLocks(n int, rng *rand.Rand, addrs []string) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for i := range n {
		r.pins++
		k := lockKey{fmt.Sprintf("lockloss:pinned:%d", r.pins), lockStyle(i % 2)}
		owner := fmt.Sprintf("%s-pin:%d", r.name, r.pins)
		addr := addrs[rng.IntN(len(addrs))]
		client := r.hist.newClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := lockOp{Kind: opAcquire, Style: k.style, Key: k.name, Owner: owner}
			call := r.hist.now()
			res, _, err := r.scripts.run(r.client(addr), op, r.lease)
			r.hist.add(client, op, call, res, r.hist.now())
			if err != nil {
				r.t.Errorf("%s: %s on %s: %v", r.name, describeLockOp(op, res), addr, err)
			}
			if res.Outcome == outcomeOK && res.Reply == replyAcquired {
				r.hist.hold(holdSpan{key: k.name, owner: owner, from: r.hist.now(), to: math.MaxInt64})
				r.held.pin(heldLock{key: k.name, style: k.style, owner: owner, call: call, lease: r.lease})
				mu.Lock()
				acked++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// lockProblem is a lock that was not held as acknowledged.
type lockProblem struct {
	lock heldLock
	lost bool // absent, or held by another owner
	what string
}

// checkHeld reads every lock of locks on the server at addr and returns those
// not held as acknowledged (see judgeHeld). Reads that fail are retried until
// retryFor has passed. The reads go into the history.
func (r *lockRun) checkHeld(addr string, locks []heldLock, retryFor time.Duration) []lockProblem {
	client := r.hist.newClient()
	var problems []lockProblem
	deadline := time.Now().Add(retryFor)
	for _, l := range locks {
		state, pttl, err := r.readLock(addr, client, l, deadline)
		if err != nil {
			problems = append(problems, lockProblem{lock: l, what: err.Error()})
			continue
		}
		if what, lost := judgeHeld(l, state, pttl, time.Duration(r.hist.now()-l.call)); what != "" {
			problems = append(problems, lockProblem{lock: l, lost: lost, what: what})
		}
	}
	return problems
}

// judgeHeld says how l, read back as state with pttl left, elapsed after its
// acquire was called, is not held as acknowledged, and whether it is lost
// (absent, or held by another owner); "" if it is held as it must be. It
// must be held by the same owner, with a remaining lease no shorter than the
// lease minus elapsed, less a tolerance of 250 ms and of the 1% by which the
// log clock may run fast. A lease that may have run out by the read (a
// short one, read after a long fault) proves nothing either way: that it
// does end, and not early, is checkExpired's to check.
func judgeHeld(l heldLock, state lockState, pttl, elapsed time.Duration) (what string, lost bool) {
	floor := l.lease - elapsed - elapsed/100 - 250*time.Millisecond
	switch {
	case state.Owner == l.owner && pttl > l.lease:
	case floor <= 0:
		return "", false
	case state.Owner != l.owner:
		return fmt.Sprintf("acknowledged to %s, read back as %s", l.owner, readReplyOf(state)), true
	case pttl < floor:
	default:
		return "", false
	}
	return fmt.Sprintf("PTTL %d ms, %v after the acquire was called with a lease of %v: want %d..%d ms",
		pttl.Milliseconds(), elapsed.Round(time.Millisecond), l.lease, max(floor, 0).Milliseconds(), l.lease.Milliseconds()), false
}

// readLock reads l's owner and remaining lease on the server at addr,
// retrying until deadline while the server cannot answer.
func (r *lockRun) readLock(addr string, client int, l heldLock, deadline time.Time) (lockState, time.Duration, error) {
	c := r.client(addr)
	op := lockOp{Kind: opRead, Style: l.style, Key: l.key}
	for {
		call := r.hist.now()
		res, state, err := r.scripts.run(c, op, r.lease)
		if err != nil {
			r.t.Errorf("%s: %s on %s: %v", r.name, describeLockOp(op, res), addr, err)
		}
		if res.Outcome == outcomeOK {
			if !l.expiring {
				r.hist.add(client, op, call, res, r.hist.now())
			}
			pttl, err := c.Do(context.Background(), "PTTL", l.key).Int64()
			if err == nil {
				return state, time.Duration(pttl) * time.Millisecond, nil
			}
		}
		if time.Now().After(deadline) {
			return lockState{}, 0, fmt.Errorf("%s: no reply from %s in time: %s", l.key, addr, describeLockOp(op, res))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// takeExpiring takes a SET NX PX lock with a short lease through addr,
// outside the model, and returns it with the time it was acknowledged.
func (r *lockRun) takeExpiring(addr string, lease time.Duration) (heldLock, int64) {
	c := r.client(addr)
	l := heldLock{key: "lockloss:expiring", style: styleSetNX, owner: r.name + "-expiring", call: r.hist.now(), lease: lease, expiring: true}
	op := lockOp{Kind: opAcquire, Style: l.style, Key: l.key, Owner: l.owner}
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The key is this function's alone: if an attempt whose outcome was
		// unknown took it, the next finds it held, and it is ours.
		res, _, err := r.scripts.run(c, op, lease)
		if err != nil {
			r.t.Errorf("%s: %s on %s: %v", r.name, describeLockOp(op, res), addr, err)
		}
		if res.Outcome == outcomeOK {
			return l, r.hist.now()
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: could not take the expiring lock within 20 s: %s", r.name, describeLockOp(op, res))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkExpired waits until the expiring lock l, acknowledged at ack, is past
// its lease even by a log clock running 1% slow, and checks that it is gone.
func (r *lockRun) checkExpired(addr string, l heldLock, ack int64) {
	end := ack + int64(l.lease+l.lease/100+500*time.Millisecond)
	if wait := time.Duration(end - r.hist.now()); wait > 0 {
		time.Sleep(wait)
	}
	state, pttl, err := r.readLock(addr, 0, l, time.Now().Add(20*time.Second))
	switch {
	case err != nil:
		r.t.Errorf("%s: the expiring lock: %v", r.name, err)
	case state.Owner != "":
		r.t.Errorf("%s: a lock with a lease of %v is still held by %s, PTTL %v, %v after it was acknowledged",
			r.name, l.lease, state.Owner, pttl, time.Duration(r.hist.now()-ack).Round(time.Millisecond))
	}
}

// lockWorker is one client: it takes a random key's lock, holds it a while,
// and releases it, again and again. It starts on one server and moves to
// the next when an operation fails.
type lockWorker struct {
	run    *lockRun
	rng    *rand.Rand
	id     int
	client int    // porcupine client id
	owner  string // Redisson's uuid:thread
	tokens int
	server int // index into run.addrs()
	conns  map[string]*redis.Client
	// maybe holds, by key, the owners of this worker's operations whose
	// outcome is unknown and which may have left it holding the lock, with
	// the call time of the earliest.
	maybe map[string]map[string]int64
}

func (w *lockWorker) close() {
	for _, c := range w.conns {
		c.Close()
	}
}

// do sends op to the worker's server and records it. A read that got no
// reply is not recorded: it changed nothing.
func (w *lockWorker) do(op lockOp) (lockResult, lockState, int64) {
	addrs := w.run.addrs()
	addr := addrs[w.server%len(addrs)]
	c := w.conns[addr]
	if c == nil {
		c = lockClient(addr)
		w.conns[addr] = c
	}
	call := w.run.hist.now()
	res, read, err := w.run.scripts.run(c, op, w.run.lease)
	ret := w.run.hist.now()
	if err != nil {
		w.run.t.Errorf("%s: worker %d: %s on %s: %v", w.run.name, w.id, describeLockOp(op, res), addr, err)
	}
	if res.Outcome != outcomeOK {
		w.server++
		time.Sleep(time.Duration(w.rng.IntN(20)) * time.Millisecond)
	}
	if op.Kind != opRead || res.Outcome == outcomeOK {
		w.run.hist.add(w.client, op, call, res, ret)
	}
	if res.Outcome == outcomeUnknown {
		w.client = w.run.hist.newClient()
	}
	return res, read, call
}

func (w *lockWorker) cycle() {
	k := w.run.keys[w.rng.IntN(len(w.run.keys))]
	owner := w.owner
	if k.style == styleSetNX {
		w.tokens++
		owner = fmt.Sprintf("%s/%d", w.owner, w.tokens)
	}
	res, _, call := w.do(lockOp{Kind: opAcquire, Style: k.style, Key: k.name, Owner: owner})
	switch {
	case res.Outcome == outcomeOK && res.Reply == replyAcquired:
		w.hold(k, owner, call, w.run.hist.now())
	case res.Outcome == outcomeUnknown:
		w.suspect(k, owner, call)
		w.resolve(k)
	case res.Outcome == outcomeOK && len(w.maybe[k.name]) > 0:
		// Held: perhaps by an acquire of this worker's that it could not confirm.
		w.resolve(k)
	}
}

// suspect remembers that owner's lock on k may be held, since call.
func (w *lockWorker) suspect(k lockKey, owner string, call int64) {
	m := w.maybe[k.name]
	if m == nil {
		m = map[string]int64{}
		w.maybe[k.name] = m
	}
	if prev, ok := m[owner]; !ok || call < prev {
		m[owner] = call
	}
}

// resolve reads k's owner and, if it is one of this worker's unconfirmed
// acquires, holds and releases that lock.
func (w *lockWorker) resolve(k lockKey) {
	for range 5 {
		res, st, _ := w.do(lockOp{Kind: opRead, Style: k.style, Key: k.name})
		if res.Outcome != outcomeOK {
			continue
		}
		if call, mine := w.maybe[k.name][st.Owner]; mine {
			delete(w.maybe[k.name], st.Owner)
			w.hold(k, st.Owner, call, w.run.hist.now())
		}
		return
	}
}

// hold keeps owner's lock on k for a while, reads it back sometimes, and
// releases it. Most holds are short; a few last long enough for a fault to
// find them held.
func (w *lockWorker) hold(k lockKey, owner string, call, from int64) {
	w.run.held.add(heldLock{key: k.name, style: k.style, owner: owner, call: call, lease: w.run.lease})
	var d time.Duration
	switch p := w.rng.IntN(100); {
	case p < 60:
		d = time.Duration(w.rng.IntN(3000)) * time.Microsecond
	case p < 92:
		d = time.Duration(5+w.rng.IntN(45)) * time.Millisecond
	default:
		d = time.Duration(100+w.rng.IntN(1400)) * time.Millisecond
	}
	time.Sleep(d)
	if w.rng.IntN(3) == 0 {
		w.do(lockOp{Kind: opRead, Style: k.style, Key: k.name})
	}
	w.run.held.release(k.name, owner)
	w.run.hist.hold(holdSpan{key: k.name, owner: owner, from: from, to: w.run.hist.now()})
	op := lockOp{Kind: opRelease, Style: k.style, Key: k.name, Owner: owner}
	for range 20 {
		res, _, _ := w.do(op)
		switch {
		case res.Outcome == outcomeOK && res.Reply == replyStill:
			// Re-entered by an acquire this worker could not confirm: again.
		case res.Outcome == outcomeOK:
			return
		case res.Outcome == outcomeUnknown:
			w.suspect(k, owner, call)
			return
		}
	}
	w.suspect(k, owner, call)
}

// lockVerdict is what the checks found in a run's history.
type lockVerdict struct {
	ops, unknown int
	result       porcupine.CheckResult
	// report shows the operations around the first one porcupine could not
	// linearize, for each key whose history is not linearizable.
	report string
	// visualization is porcupine's HTML rendering of the history, if written.
	visualization string
	// overlaps describes acquisitions of a lock that another client still held.
	overlaps []string
	took     time.Duration // by porcupine
}

// verdict checks the history with porcupine (within timeout) and for
// overlapping holds. If the history is not linearizable and explain is set,
// it checks again to show where. Call it after the workers stopped.
func (r *lockRun) verdict(timeout time.Duration, explain bool) lockVerdict {
	h := r.hist
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	holds := append([]holdSpan(nil), h.holds...)
	h.mu.Unlock()
	v := lockVerdict{ops: len(ops)}
	for _, op := range ops {
		if op.Output.(lockResult).Outcome == outcomeUnknown {
			v.unknown++
		}
	}
	v.overlaps = overlappingHolds(holds)
	start := time.Now()
	v.result = porcupine.CheckOperationsTimeout(lockModel, ops, timeout)
	v.took = time.Since(start)
	if v.result == porcupine.Ok || !explain {
		return v
	}
	// Again, keeping what it takes to show where it failed.
	var info porcupine.LinearizationInfo
	v.result, info = porcupine.CheckOperationsVerbose(lockModel, ops, timeout)
	if f, err := os.CreateTemp("", "lockloss-"+r.name+"-*.html"); err == nil {
		if porcupine.Visualize(lockModel, info, f) == nil {
			v.visualization = f.Name()
		}
		f.Close()
	}
	if v.result == porcupine.Illegal {
		v.report = illegalSlices(ops, info)
	}
	return v
}

// illegalSlices shows, for each key whose history porcupine could not
// linearize, the operations around the first one left out of the longest
// linearizable prefix it found.
func illegalSlices(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	for _, partials := range info.PartialLinearizationsOperations() {
		if len(partials) == 0 {
			continue
		}
		longest := partials[0]
		for _, p := range partials {
			if len(p) > len(longest) {
				longest = p
			}
		}
		if len(longest) == 0 {
			continue
		}
		key := longest[0].Input.(lockOp).Key
		var keyOps []porcupine.Operation
		for _, op := range ops {
			if op.Input.(lockOp).Key == key {
				keyOps = append(keyOps, op)
			}
		}
		if len(longest) == len(keyOps) {
			continue // this key's history is linearizable
		}
		sort.Slice(keyOps, func(i, j int) bool { return keyOps[i].Call < keyOps[j].Call })
		in := map[porcupine.Operation]bool{}
		for _, op := range longest {
			in[op] = true
		}
		first := 0
		for first < len(keyOps) && in[keyOps[first]] {
			first++
		}
		fmt.Fprintf(&b, "key %s: %d operations, %d linearized; the first left out is marked >>\n", key, len(keyOps), len(longest))
		for i := max(0, first-15); i < min(len(keyOps), first+15); i++ {
			op := keyOps[i]
			mark := "  "
			if i == first {
				mark = ">>"
			}
			ret := "open"
			if op.Return != math.MaxInt64 {
				ret = fmt.Sprintf("%.3f", float64(op.Return)/1e6)
			}
			fmt.Fprintf(&b, "%s client %3d  %10.3f..%-10s ms  %s\n", mark, op.ClientId, float64(op.Call)/1e6, ret,
				describeLockOp(op.Input.(lockOp), op.Output.(lockResult)))
		}
	}
	return b.String()
}

// overlappingHolds returns the acquisitions of a lock that another owner
// still held.
// A span that overlaps any earlier one overlaps the one that ends last.
func overlappingHolds(holds []holdSpan) []string {
	sort.Slice(holds, func(i, j int) bool {
		if holds[i].key != holds[j].key {
			return holds[i].key < holds[j].key
		}
		return holds[i].from < holds[j].from
	})
	var out []string
	var last holdSpan // of the spans of this key so far, the one that ends last
	for i, cur := range holds {
		if i > 0 && cur.key == last.key {
			if last.to > cur.from && last.owner != cur.owner {
				out = append(out, fmt.Sprintf("%s: %s held it from %.3f ms until %s, and %s from %.3f ms",
					cur.key, last.owner, float64(last.from)/1e6, spanEnd(last.to), cur.owner, float64(cur.from)/1e6))
			}
			if cur.to <= last.to {
				continue
			}
		}
		last = cur
	}
	return out
}

func spanEnd(to int64) string {
	if to == math.MaxInt64 {
		return "the end"
	}
	return fmt.Sprintf("%.3f ms", float64(to)/1e6)
}

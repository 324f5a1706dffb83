package luaexec

import (
	"crypto/sha1"
	"maps"
	"sync"
	"sync/atomic"
)

// scriptCache holds the script bodies, which are replicated state (SCRIPT
// LOAD and EVAL add, SCRIPT FLUSH clears), and a bounded cache of their
// compiled forms, which is not: a miss recompiles, with the same result on
// every node. Both are keyed by the SHA1 in lower-case hex. It is safe for
// concurrent use, so that Prepare may run beside ExecAs.
//
// Every EVALSHA looks its script up twice (Prepare and ExecAs), often on two
// cores at once, so lookups share a read lock and, once a script's use is
// recorded, write nothing: a shared LRU list rewritten on every lookup made
// the two cores wait for each other's cache lines. Recency is kept in epochs
// instead: each compile stamps its script with a new epoch and starts another
// for the uses after it, so uses between two compiles count as one moment. A
// full cache evicts the script with the oldest stamp, found by a scan, which
// is small beside the compile that caused it.
//
// Even a read lock writes its count, a cache line the two cores then pass
// back and forth: profiles of embedded lock cycles through Do found a share
// of their CPU in the read lock's atomic add. So a script found loaded and
// compiled under the lock is added to ready, a map no one changes once it
// is published, which later lookups read without a lock. It is copied to
// add a script, to drop one evicted, and emptied by a flush; a client that
// EVALs a new body each time never finds one loaded and compiled, and
// copies nothing.
type scriptCache struct {
	mu       sync.RWMutex
	bodies   map[string]string
	max      int
	budget   func() int64 // of compile work for one script, now
	compiled map[string]*compiled
	epoch    atomic.Uint64 // the stamp of uses now; advanced under the write lock
	ready    atomic.Pointer[map[string]*compiled]
}

func newScriptCache(max int, budget func() int64) *scriptCache {
	c := &scriptCache{bodies: make(map[string]string), max: max, budget: budget, compiled: make(map[string]*compiled)}
	c.ready.Store(&map[string]*compiled{})
	return c
}

// promote adds s to ready if it is still loaded and compiled.
func (c *scriptCache) promote(s *compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ready := *c.ready.Load()
	if _, loaded := c.bodies[s.sha]; !loaded || c.compiled[s.sha] != s || ready[s.sha] != nil {
		return
	}
	m := maps.Clone(ready)
	m[s.sha] = s
	c.ready.Store(&m)
}

// lookup returns the body of the script whose SHA1 is sha, in hex of either
// case, and its compiled form when it is at hand: what every EVALSHA needs,
// without allocating, and for a script in ready without a lock.
func (c *scriptCache) lookup(sha []byte) (body string, s *compiled, ok bool) {
	if s := (*c.ready.Load())[string(sha)]; s != nil {
		c.touch(s)
		return s.body, s, true
	}
	c.mu.RLock()
	body, s, ok = c.lookupLocked(sha)
	c.mu.RUnlock()
	if s != nil {
		c.promote(s)
	}
	return body, s, ok
}

// lookupLocked is lookup's search under the read lock.
func (c *scriptCache) lookupLocked(sha []byte) (body string, s *compiled, ok bool) {
	key := sha
	if body, ok = c.bodies[string(key)]; !ok {
		// Clients send lower case; try upper case only when that fails.
		var lower [2 * sha1.Size]byte
		if len(sha) != len(lower) {
			return "", nil, false
		}
		for i, ch := range sha {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			lower[i] = ch
		}
		key = lower[:]
		if body, ok = c.bodies[string(key)]; !ok {
			return "", nil, false
		}
	}
	if s = c.compiled[string(key)]; s != nil {
		c.touch(s)
	}
	return body, s, true
}

// touch records a use of s in the current epoch.
func (c *scriptCache) touch(s *compiled) {
	if e := c.epoch.Load(); s.used.Load() != e {
		s.used.Store(e)
	}
}

func (c *scriptCache) add(sha, body string) {
	c.mu.Lock()
	c.bodies[sha] = body
	c.mu.Unlock()
}

func (c *scriptCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies = make(map[string]string)
	c.compiled = make(map[string]*compiled)
	c.ready.Store(&map[string]*compiled{})
}

// get returns the compiled form of a body, compiling it on a miss.
func (c *scriptCache) get(sha, body string) (*compiled, string) {
	c.mu.RLock()
	if s := c.compiled[sha]; s != nil {
		c.touch(s)
		c.mu.RUnlock()
		return s, ""
	}
	c.mu.RUnlock()
	s, msg := compileScript(sha, body, c.budget())
	if s == nil {
		return nil, msg
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.compiled[sha]; old != nil { // compiled meanwhile by another caller
		return old, ""
	}
	s.used.Store(c.epoch.Load() + 1)
	c.epoch.Add(2)
	c.compiled[sha] = s
	if len(c.compiled) > c.max {
		// Every other script's stamp is older than s's: s is never evicted.
		var oldest *compiled
		for _, o := range c.compiled {
			if oldest == nil || o.used.Load() < oldest.used.Load() {
				oldest = o
			}
		}
		delete(c.compiled, oldest.sha)
		if ready := *c.ready.Load(); ready[oldest.sha] != nil {
			m := maps.Clone(ready)
			delete(m, oldest.sha)
			c.ready.Store(&m)
		}
	}
	return s, ""
}

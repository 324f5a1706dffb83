package replication

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// loadExpiring is a script that sets ARGV[1] keys that expire in ARGV[2] ms,
// and ARGV[3] of each kind that do not: with a long deadline and with none.
const loadExpiring = `
for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'gone' .. i, 'v', 'PX', ARGV[2]) end
for i = 1, tonumber(ARGV[3]) do
  redis.call('SET', 'lease' .. i, 'v', 'PX', 600000)
  redis.call('SET', 'kept' .. i, 'v')
end
return 1`

// keyCounts returns n's count of keys and of keys with a deadline in
// database 0, expired ones not yet swept included.
func keyCounts(n *testNode) (keys, volatile int) {
	n.eng.smMu.Lock()
	defer n.eng.smMu.Unlock()
	k, v := n.eng.sm.Load().keyCounts()
	return k[0], v[0]
}

// An idle cluster reclaims expired keys: once they expire, no client writes,
// yet every member's keyspace loses them (the leader proposes the sweeps),
// and every member ends with the same state.
func TestClusterIdleReclaimsExpired(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	wantReply(t, "load", c.idem(l, 0, "EVAL", loadExpiring, "0", "5000", "300", "100"), keyspace.Int(1))
	// No write from here on.
	for _, n := range c.Nodes {
		c.eventually(n.id+" reclaims the expired keys", func() bool {
			k, v := keyCounts(n)
			return k == 200 && v == 100
		})
	}
	c.eventually("every member applies the last sweep", func() bool {
		a := l.eng.applied.Load()
		for _, n := range c.Nodes {
			if n.eng.applied.Load() != a {
				return false
			}
		}
		return true
	})
	want := stateOf(t, l)
	for _, n := range c.followers(l) {
		if !bytes.Equal(stateOf(t, n), want) {
			t.Errorf("%s's state differs from the leader's after the sweeps", n.id)
		}
	}
	wantReply(t, "a lease kept", c.do(l, 0, "EXISTS", "lease1", "kept100"), keyspace.Int(2))
}

// stateOf returns n's state as stateBytes writes it.
func stateOf(t *testing.T, n *testNode) []byte {
	n.eng.smMu.Lock()
	sm := n.eng.sm.Load()
	snap := sm.freeze()
	n.eng.smMu.Unlock()
	var buf bytes.Buffer
	if err := snap.write(&buf, nil); err != nil {
		t.Fatal(err)
	}
	n.eng.smMu.Lock()
	snap.release()
	n.eng.smMu.Unlock()
	return buf.Bytes()
}

// A standalone node reclaims keys that expire together, without a write.
func TestStandaloneReclaimsExpired(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	req := &Request{Cmds: [][][]byte{words("EVAL", loadExpiring, "0", "20000", "50", "10")}}
	s.Submit(req)
	wantReply(t, "load", req.Wait(context.Background()), keyspace.Int(1))
	deadline := time.Now().Add(20 * time.Second)
	for {
		info := s.Info()
		if info.Keys[0] == 20 && info.Expires[0] == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %d keys, %d with a deadline; want 20 and 10", info.Keys[0], info.Expires[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The cursor looks at one database after another, each from where its last
// look stopped, skipping those without a key with a deadline; a cycle goes
// on while a look finds a tenth or more of the keys expired.
func TestExpiryCursor(t *testing.T) {
	sm := newStateMachine(luaexec.Options{}, nil, false)
	apply := func(db int, cmd ...string) {
		sm.apply(&logcodec.Entry{Time: 1000, DB: db, Cmds: [][][]byte{words(cmd...)}}, 0, nil)
	}
	for i := range 6000 {
		apply(0, "SET", fmt.Sprint("a", i), "v", "PX", "100")
	}
	apply(3, "SET", "b", "v", "PX", "5000")
	apply(5, "SET", "c", "v") // no deadline: never looked at
	var cur expiryCursor
	db, from, shards, examined, expired := cur.look(sm, 2000)
	if db != 0 || from != 0 || examined < expiryStep || expired != examined || shards >= keyspace.NumShards {
		t.Fatalf("first look: db %d, shards %d from %d, %d examined, %d expired", db, shards, from, examined, expired)
	}
	if db, from2, _, examined, expired := cur.look(sm, 2000); db != 3 || from2 != 0 || examined != 1 || expired != 0 {
		t.Fatalf("second look: db %d from %d, %d examined, %d expired; want db 3, the key b, live", db, from2, examined, expired)
	}
	if db, from3, shards3, examined3, _ := cur.look(sm, 2000); db != 0 || from3 != from+shards || examined+examined3 != 6000 || from3+shards3 != keyspace.NumShards {
		t.Fatalf("third look: db %d, %d shards from %d, %d examined; want db 0 from %d to the end, the rest of its 6000 keys",
			db, shards3, from3, examined3, from+shards)
	}
	cur.look(sm, 2000) // db 3
	if db, from4, _, _, _ := cur.look(sm, 2000); db != 0 || from4 != 0 {
		t.Fatalf("fifth look: db %d from %d; want db 0 from its first shard again", db, from4)
	}
	for _, c := range []struct {
		examined, expired int
		again             bool
	}{{10, 1, true}, {11, 1, false}, {4096, 4096, true}, {0, 0, false}, {5, 0, false}} {
		if got := again(c.examined, c.expired); got != c.again {
			t.Errorf("again(%d, %d) = %v", c.examined, c.expired, got)
		}
	}
}

// heapHeld returns the heap memory the process holds from the operating
// system: its objects, live or garbage, and free pages not given back.
func heapHeld() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapSys - m.HeapReleased
}

// loadReturned is a script that sets the keys ARGV[1] to ARGV[2], of
// ARGV[3] bytes, and expireReturned one that gives them ARGV[3] ms to live.
const (
	loadReturned = `
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('SET', 'gone' .. i, string.rep('x', tonumber(ARGV[3]))) end
return 1`
	expireReturned = `
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do redis.call('PEXPIRE', 'gone' .. i, ARGV[3]) end
return 1`
)

// returnsMemory loads, through submit, more keys than a return needs
// (returnMin), lets them expire, waits until keys reports them gone and
// then until the heap the process holds is back within a quarter of what
// they grew it by.
func returnsMemory(t *testing.T, submit func(cmd ...string) keyspace.Reply, keys func() int) {
	t.Helper()
	const n, size = returnMin + 10_000, 1024 // n a multiple of 1000
	debug.FreeOSMemory()
	base := heapHeld()
	// In scripts of 1000 keys (a script's budget), with no deadline, so
	// that every key is there at once however slow the machine; then they
	// expire together.
	for from := 1; from <= n; from += 1000 {
		wantReply(t, "load", submit("EVAL", loadReturned, "0", fmt.Sprint(from), fmt.Sprint(from+999), fmt.Sprint(size)), keyspace.Int(1))
	}
	grown := heapHeld() - min(heapHeld(), base)
	// From here on no collection runs but those a return asks for (a
	// running cluster collects often, and Go's scavenger then gives free
	// pages back within seconds on its own).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for from := 1; from <= n; from += 1000 {
		wantReply(t, "expire", submit("EVAL", expireReturned, "0", fmt.Sprint(from), fmt.Sprint(from+999), "100"), keyspace.Int(1))
	}
	if grown < n*size/2 {
		t.Fatalf("%d keys of %d bytes grew the heap held by %d bytes only", n, size, grown)
	}
	deadline := time.Now().Add(clustertest.Wait)
	for keys() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left %v after they expired", keys(), clustertest.Wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Sweeping stopped: the return is due returnQuiet later.
	deadline = time.Now().Add(10 * returnQuiet)
	for {
		held := heapHeld()
		if held < base+grown/4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heap held %d MB before the load, %d MB more after it, still %d MB more %v after the keys were removed",
				base>>20, grown>>20, (held-min(held, base))>>20, 10*returnQuiet)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A standalone node gives the memory of a mass expiry back to the
// operating system once its sweeps have removed the keys.
func TestStandaloneReturnsSweptMemory(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	returnsMemory(t, func(cmd ...string) keyspace.Reply {
		req := &Request{Cmds: [][][]byte{words(cmd...)}}
		s.Submit(req)
		return req.Wait(context.Background())
	}, func() int { return s.Info().Keys[0] })
}

// So does a cluster member, applying the leader's sweeps.
func TestClusterReturnsSweptMemory(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	returnsMemory(t, func(cmd ...string) keyspace.Reply { return c.idem(l, 0, cmd...) }, func() int {
		most := 0
		for _, n := range c.Nodes {
			k, _ := keyCounts(n)
			most = max(most, k)
		}
		return most
	})
}

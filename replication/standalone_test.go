package replication

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// While two goroutines wait for the state machine, scripts queue for its
// holder (see Standalone): each submitter's requests still take effect in the
// order it submitted them, an EVALSHA queued behind the SCRIPT LOAD of its
// script finds it, a request that makes the state machine panic fails alone,
// and a queue longer than a holder's budget is carried on by the goroutines
// it hands over to.
//
// The test holds the state machine, as a sweep does, and has two goroutines
// wait for it, so that every script submitted meanwhile is queued for certain.
func TestStandaloneQueuesScriptsInOrderWhileBusy(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	submit := func(cmd ...string) *Request {
		req := &Request{Cmds: [][][]byte{words(cmd...)}}
		s.Submit(req)
		return req
	}

	s.mu.Lock()
	var waiters sync.WaitGroup
	sets := make([]*Request, 2)
	for i := range sets {
		sets[i] = &Request{Cmds: [][][]byte{words("SET", "waiter"+strconv.Itoa(i), "1")}}
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			s.Submit(sets[i]) // not a script: waits for the mutex
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); s.contending.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two SETs never waited for the state machine")
		}
	}

	body := "return 'loaded'"
	sum := sha1.Sum([]byte(body))
	load := submit("SCRIPT", "LOAD", body)
	evalsha := submit("EVALSHA", hex.EncodeToString(sum[:]), "0")
	// A transaction with a script is queued; its SET, outside Lua, in no
	// such database, panics.
	bug := &Request{DB: keyspace.NumDBs, Multi: true, Cmds: [][][]byte{words("EVAL", "return 1", "0"), words("SET", "k", "v")}}
	s.Submit(bug)
	after := submit("EVAL", "return redis.call('SET', KEYS[1], '1')", "1", "after")
	for what, req := range map[string]*Request{"SCRIPT LOAD": load, "EVALSHA": evalsha, "the bad request": bug, "EVAL after": after} {
		if req.Ready() {
			t.Fatalf("%s was answered while the state machine was held", what)
		}
	}

	const submitters, each = 4, runBudget // together, four holders' budgets
	var wg sync.WaitGroup
	lists := make([][]*Request, submitters)
	for g := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				lists[g] = append(lists[g], submit("EVAL", "return redis.call('RPUSH', KEYS[1], ARGV[1])", "1", "list"+strconv.Itoa(g), strconv.Itoa(i)))
			}
		}()
	}
	wg.Wait()
	s.mu.Unlock()
	waiters.Wait()

	for i, req := range sets {
		wantReply(t, "the SET that waited for the mutex", waitReply(req), keyspace.OK)
		wantReply(t, "GET of its key", waitReply(submit("GET", "waiter"+strconv.Itoa(i))), keyspace.Bulk("1"))
	}
	wantReply(t, "SCRIPT LOAD", waitReply(load), keyspace.Bulk(hex.EncodeToString(sum[:])))
	wantReply(t, "EVALSHA queued behind its SCRIPT LOAD", waitReply(evalsha), keyspace.Bulk("loaded"))
	wantErrPrefix(t, "a request that makes the state machine panic", waitReply(bug), "ERR internal error")
	wantReply(t, "EVAL after the bad request", waitReply(after), keyspace.OK)
	for g, reqs := range lists {
		for i, req := range reqs {
			wantReply(t, "RPUSH", waitReply(req), keyspace.Int(int64(i+1)))
		}
		got := waitReply(submit("LRANGE", "list"+strconv.Itoa(g), "0", "-1"))
		if len(got.Elems) != each {
			t.Fatalf("list%d has %d elements, want %d", g, len(got.Elems), each)
		}
		for i, e := range got.Elems {
			if e.Str != strconv.Itoa(i) {
				t.Fatalf("list%d[%d] = %q: the submitter's order was lost", g, i, e.Str)
			}
		}
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if len(s.queue) != 0 || s.waiting.Load() != 0 || s.contending.Load() != 0 {
		t.Fatalf("after the queue drained: %d queued, waiting %d, contending %d", len(s.queue), s.waiting.Load(), s.contending.Load())
	}
}

// Many goroutines each count a key of their own up, by a script and then a
// plain INCR submitted without waiting for the script, while the others keep
// the engine busy: the script, queued or not, takes effect first every time.
func TestStandaloneKeepsEachSubmittersOrderUnderContention(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	const goroutines, each = 32, 300
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "n" + strconv.Itoa(g)
			for i := range each {
				script := &Request{Cmds: [][][]byte{words("EVAL", "return redis.call('INCR', KEYS[1])", "1", key)}}
				s.Submit(script)
				plain := &Request{Cmds: [][][]byte{words("INCR", key)}}
				s.Submit(plain)
				got1, got2 := waitReply(script), waitReply(plain)
				if got1.Int != int64(2*i+1) || got2.Int != int64(2*i+2) {
					errs <- fmt.Sprintf("%s: the script counted %d and INCR %d, want %d then %d (%s %s)", key, got1.Int, got2.Int, 2*i+1, 2*i+2, got1.Str, got2.Str)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// An EVALSHA of a script nobody loaded is refused with NOSCRIPT.
func TestStandaloneNoScript(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	req := &Request{Cmds: [][][]byte{words("EVALSHA", "0123456789012345678901234567890123456789", "0")}}
	s.Submit(req)
	wantErrPrefix(t, "EVALSHA of an unknown script", waitReply(req), "NOSCRIPT")
}

// A request that finds the engine free while a script is still queued (the
// holder has let go and not yet looked again) runs after that script: the
// script may be its own submitter's, submitted first.
func TestStandaloneRunsTheQueueBeforeAFreeTaker(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	s.mu.Lock()
	script := &Request{Cmds: [][][]byte{words("EVAL", "return redis.call('INCR', KEYS[1])", "1", "n")}}
	effect, _ := s.sm.prepare(script)
	s.enqueue(queued{req: script, write: effect != keyspace.Reads, now: s.clock.Now()})
	s.mu.Unlock() // as a holder does before its last look at the queue
	plain := &Request{Cmds: [][][]byte{words("INCR", "n")}}
	s.Submit(plain)
	wantReply(t, "the queued script", waitReply(script), keyspace.Int(1))
	wantReply(t, "INCR after it", waitReply(plain), keyspace.Int(2))
}

package replication

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// While one request runs, the others queue for the runner (see Standalone):
// each submitter's requests still take effect in the order it submitted them,
// an EVALSHA queued behind the SCRIPT LOAD of its script finds it, a request
// that makes the state machine panic fails alone, and a queue longer than a
// runner's budget is carried on by the goroutines it hands over to.
//
// The test holds the state machine, as a sweep does, so that every request
// submitted meanwhile is queued for certain.
func TestStandaloneQueuesInOrderWhileBusy(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	submit := func(cmd ...string) *Request {
		req := &Request{Cmds: [][][]byte{words(cmd...)}}
		s.Submit(req)
		return req
	}

	s.mu.Lock()
	first := &Request{Cmds: [][][]byte{words("SET", "first", "1")}}
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		s.Submit(first) // becomes the runner, and waits for the state machine
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.qmu.Lock()
		running := s.running
		s.qmu.Unlock()
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request never became the runner")
		}
	}

	body := "return 'loaded'"
	sum := sha1.Sum([]byte(body))
	load := submit("SCRIPT", "LOAD", body)
	evalsha := submit("EVALSHA", hex.EncodeToString(sum[:]), "0")
	bug := &Request{DB: keyspace.NumDBs, Cmds: [][][]byte{words("SET", "k", "v")}} // no such database
	s.Submit(bug)
	after := submit("SET", "after", "1")
	for what, req := range map[string]*Request{"SCRIPT LOAD": load, "EVALSHA": evalsha, "the bad request": bug, "SET after": after} {
		if req.Ready() {
			t.Fatalf("%s was answered while the state machine was held", what)
		}
	}

	const submitters, each = 4, runBudget // together, four runners' budgets
	var wg sync.WaitGroup
	lists := make([][]*Request, submitters)
	for g := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				lists[g] = append(lists[g], submit("RPUSH", "list"+strconv.Itoa(g), strconv.Itoa(i)))
			}
		}()
	}
	wg.Wait()
	s.mu.Unlock()
	<-firstDone

	wantReply(t, "the runner's own SET", first.reply, keyspace.OK)
	wantReply(t, "SCRIPT LOAD", waitReply(load), keyspace.Bulk(hex.EncodeToString(sum[:])))
	wantReply(t, "EVALSHA queued behind its SCRIPT LOAD", waitReply(evalsha), keyspace.Bulk("loaded"))
	wantErrPrefix(t, "a request that makes the state machine panic", waitReply(bug), "ERR internal error")
	wantReply(t, "SET after the bad request", waitReply(after), keyspace.OK)
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
	if s.running || len(s.queue) != 0 {
		t.Fatalf("after the queue drained: running %v, %d queued", s.running, len(s.queue))
	}
}

// An EVALSHA of a script nobody loaded is refused with NOSCRIPT, queued or not.
func TestStandaloneNoScript(t *testing.T) {
	s := NewStandalone(StandaloneOptions{})
	defer s.Close()
	req := &Request{Cmds: [][][]byte{words("EVALSHA", "0123456789012345678901234567890123456789", "0")}}
	s.Submit(req)
	wantErrPrefix(t, "EVALSHA of an unknown script", waitReply(req), "NOSCRIPT")
}

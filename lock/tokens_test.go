package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/lock"
	"github.com/redis/go-redis/v9"
)

// acquisition is one Lock that returned holding the lock.
type acquisition struct {
	name  string
	token uint64
}

// tokenModel: each lock's tokens only grow. An acquisition is legal when its
// token is above every token of the acquisitions linearized before it, so a
// history is refused when one acquisition finished before another began and
// got a token at least as high, or when two got the same token.
var tokenModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byName := map[string][]porcupine.Operation{}
		var names []string
		for _, op := range history {
			name := op.Output.(acquisition).name
			if byName[name] == nil {
				names = append(names, name)
			}
			byName[name] = append(byName[name], op)
		}
		parts := make([][]porcupine.Operation, len(names))
		for i, name := range names {
			parts[i] = byName[name]
		}
		return parts
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		token := output.(acquisition).token
		return token > state.(uint64), token
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		a := output.(acquisition)
		return fmt.Sprintf("Lock(%s) -> token %d", a.name, a.token)
	},
}

// The model refuses what it must: a token that does not grow after an
// acquisition that finished first, and two equal tokens.
func TestTokenModel(t *testing.T) {
	op := func(client int, token uint64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Output: acquisition{"x", token}}
	}
	for _, c := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"growing", []porcupine.Operation{op(0, 1, 0, 10), op(1, 2, 20, 30), op(0, 5, 40, 50)}, true},
		{"concurrent, either order", []porcupine.Operation{op(0, 3, 0, 10), op(1, 2, 5, 30)}, true},
		{"lower after a finished one", []porcupine.Operation{op(0, 3, 0, 10), op(1, 2, 20, 30)}, false},
		{"the same token twice", []porcupine.Operation{op(0, 2, 0, 10), op(1, 2, 5, 30)}, false},
	} {
		if got := porcupine.CheckOperations(tokenModel, c.history); got != c.ok {
			t.Errorf("%s: CheckOperations = %v, want %v", c.name, got, c.ok)
		}
	}
}

// Tokens grow per name across a leader kill and a whole-cluster restart.
// Workers lock and unlock two names through all three members while the
// leader is stopped and later restarted, and then while all three members
// are stopped and started again from their data directories; every
// acquisition is recorded with its token and checked with porcupine.
func TestTokensGrowAcrossFailures(t *testing.T) {
	testenv.Long(t)
	c := embedded.Start(t, embedded.Options{})
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 6
	for w := range workers {
		rdb := redis.NewClient(&redis.Options{Addr: c.Nodes[w%3].Options.Addr})
		defer rdb.Close()
		b := lock.Redis(rdb)
		defer b.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("token-", w%2)
			for {
				select {
				case <-stop:
					return
				default:
				}
				m := lock.NewMutex(b, name, &lock.Options{Lease: 3 * time.Second})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				call := time.Since(start).Nanoseconds()
				err := m.Lock(ctx)
				ret := time.Since(start).Nanoseconds()
				if err == nil {
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: w, Call: call, Return: ret, Output: acquisition{name, m.Token()}})
					mu.Unlock()
					time.Sleep(time.Millisecond)
					m.Unlock(ctx)
				} else {
					time.Sleep(20 * time.Millisecond)
				}
				cancel()
			}
		}()
	}
	// acquired waits until n more acquisitions are recorded.
	acquired := func(what string, n int) {
		t.Helper()
		mu.Lock()
		want := len(history) + n
		mu.Unlock()
		deadline := time.Now().Add(testTimeout)
		for {
			mu.Lock()
			got := len(history)
			mu.Unlock()
			if got >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d acquisitions, want %d", what, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	acquired("before the failures", 50)
	l := c.Leader(t)
	l.Stop()
	acquired("with the leader stopped", 50)
	l.Start(t)
	acquired("with the old leader back", 50)
	for _, m := range c.Nodes {
		m.Stop()
	}
	restarted := time.Since(start).Nanoseconds()
	for _, m := range c.Nodes {
		m.Start(t)
	}
	acquired("after the whole cluster restarted", 50)
	close(stop)
	wg.Wait()

	after := 0
	for _, op := range history {
		if op.Call > restarted {
			after++
		}
	}
	if after == 0 {
		t.Fatal("no Lock began after the whole-cluster restart")
	}
	if !porcupine.CheckOperations(tokenModel, history) {
		t.Fatalf("tokens did not only grow over %d acquisitions", len(history))
	}
	t.Logf("%d acquisitions, %d of them begun after the whole-cluster restart", len(history), after)
}

package luaexec

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/lockserver/lockserver/keyspace"
)

// benchEvalsha loads script and runs EVALSHA with keys and args b.N times,
// as the state machine runs an applied entry.
func benchEvalsha(b *testing.B, script string, setup [][]string, args ...string) {
	benchEvalshaRecorded(b, false, script, setup, args...)
}

// benchEvalshaRecorded is benchEvalsha, the engine recording the script's
// calls (and each run's calls taken) if record is set, as it does on the
// node that answers the script's client.
func benchEvalshaRecorded(b *testing.B, record bool, script string, setup [][]string, args ...string) {
	h := newHarness(b, Options{})
	h.e.Record(record)
	for _, cmd := range setup {
		h.do(cmd...)
	}
	sha := h.do("SCRIPT", "LOAD", script).Str
	argv := append([]string{"EVALSHA", sha}, args...)
	c := h.call(argv)
	if r := h.e.exec(c, true); r.IsError() {
		b.Fatalf("%s", r.Str)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call := keyspace.Call{Store: c.Store, Now: c.Now, Args: c.Args}
		if r := h.e.exec(&call, true); r.IsError() {
			b.Fatalf("%s", r.Str)
		}
		if record && len(h.e.Calls()) == 0 {
			b.Fatal("no calls recorded")
		}
		h.e.Record(record)
	}
}

// Re-entry of a held Redisson lock: EXISTS, HEXISTS, HINCRBY, PEXPIRE.
func BenchmarkEvalRedissonLock(b *testing.B) {
	benchEvalsha(b, lockscripts.MustSource(b, "redisson_lock.lua"), nil, "1", "lock", "30000", "owner:1")
}

// The same, its four calls timed and kept for INFO commandstats.
func BenchmarkEvalRedissonLockRecorded(b *testing.B) {
	benchEvalshaRecorded(b, true, lockscripts.MustSource(b, "redisson_lock.lua"), nil, "1", "lock", "30000", "owner:1")
}

// A Redisson lock held by another owner: EXISTS, HEXISTS, PTTL.
func BenchmarkEvalRedissonLockContended(b *testing.B) {
	benchEvalsha(b, lockscripts.MustSource(b, "redisson_lock.lua"),
		[][]string{{"HSET", "lock", "other:1", "1"}, {"PEXPIRE", "lock", "30000000"}},
		"1", "lock", "30000", "owner:1")
}

// Unlock by a non-owner: HEXISTS only.
func BenchmarkEvalRedissonUnlockNotOwner(b *testing.B) {
	benchEvalsha(b, lockscripts.MustSource(b, "redisson_unlock_v1.lua"),
		[][]string{{"HSET", "lock", "other:1", "1"}},
		"2", "lock", "channel", "0", "30000", "owner:1")
}

// Compare-and-delete with a token that does not match: GET only.
func BenchmarkEvalCompareAndDelete(b *testing.B) {
	benchEvalsha(b, lockscripts.MustSource(b, "compare_and_delete.lua"), [][]string{{"SET", "lock", "token"}}, "1", "lock", "other")
}

// The cost of running a script at all.
func BenchmarkEvalReturn(b *testing.B) {
	benchEvalsha(b, "return 1", nil, "0")
}

// A loop of budgeted iterations, to relate steps to time.
func BenchmarkEvalLoop1000(b *testing.B) {
	benchEvalsha(b, "local n = 0 for i = 1, 1000 do n = n + i end return n", nil, "0")
}

// BenchmarkWorstInputs runs each of the worst inputs (budget_test.go) with
// the default budget against 16 MB strings, and reports its CPU time beside
// its wall time: the budget's bound on the work of one script is the largest.
// Each runs again and again until the budget stops it (most are bounded, so
// that each is stopped by a smaller budget only if its work is charged).
//
//	go test -run '^$' -bench WorstInputs -benchtime 3x ./luaexec
func BenchmarkWorstInputs(b *testing.B) {
	h := worstHarness(b, defaultBudget, 16<<20)
	for _, w := range worstInputs {
		script := w.script
		if !w.reply {
			script = "while true do (function() " + script + " end)() end"
		}
		b.Run(w.name, func(b *testing.B) {
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				if r := h.eval(script); !r.IsError() {
					b.Fatalf("not stopped: %s", show(r))
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkCompileDistinctConstants compiles a table constructor of 30,000
// distinct numbers, which took 4-9 s when every constant was searched for
// among all the others.
func BenchmarkCompileDistinctConstants(b *testing.B) {
	var src strings.Builder
	src.WriteString("local t = {")
	for i := 0; i < 30000; i++ {
		src.WriteString(strconv.Itoa(i) + ",")
	}
	src.WriteString("} return #t")
	body := src.String()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s, msg := compileScript("", body, defaultBudget); s == nil {
			b.Fatal(msg)
		}
	}
}

// What recording a script's calls adds to each call (two clock readings and
// keeping it) and to each script (taking them): four calls of a command
// that does nothing, as many as a Redisson lock script makes.
func BenchmarkRecordCalls(b *testing.B) {
	nop := &keyspace.Command{Name: "nop", Run: func(*keyspace.Call) keyspace.Reply { return keyspace.OK }}
	for _, record := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[record], func(b *testing.B) {
			e := New(keyspace.New(), Options{})
			e.Record(record)
			v := e.machine()
			var c keyspace.Call
			b.ReportAllocs()
			for b.Loop() {
				for range 4 {
					v.execCall(nop, &c)
				}
				e.Record(record)
			}
		})
	}
}

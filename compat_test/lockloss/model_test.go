package lockloss

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The lock model that the lock-loss test checks histories against with
// porcupine: one lock per key, whose state is its owner and, for Redisson's
// re-entrant locks, the hold count. Leases are longer than any run, so expiry
// never happens inside a history and the model has no time.

// lockStyle is how a key is locked: Redisson's scripts (a hash owner -> count)
// or SET NX PX with a compare-and-delete unlock (a string holding a token).
type lockStyle uint8

const (
	styleRedisson lockStyle = iota
	styleSetNX
)

type lockOpKind uint8

const (
	opAcquire lockOpKind = iota
	opRelease
	opRead
)

// lockOp is the input of one operation: what a client asked.
type lockOp struct {
	Kind  lockOpKind
	Style lockStyle
	Key   string
	Owner string // Redisson's uuid:thread, or the SET NX token; empty for reads
}

// lockOutcome says whether an operation took effect.
type lockOutcome uint8

const (
	// outcomeOK: the server replied; Reply is what it said.
	outcomeOK lockOutcome = iota
	// outcomeFail: the server said that nothing was written (TRYAGAIN,
	// CLUSTERDOWN), or the command never left the client (dial error).
	outcomeFail
	// outcomeUnknown: the operation may or may not have taken effect, now or
	// later (UNKNOWN replies, timeouts, lost connections). Its Return is
	// math.MaxInt64: porcupine may place it anywhere after its call.
	outcomeUnknown
)

// lockResult is the output of one operation.
type lockResult struct {
	Outcome lockOutcome
	// Reply is the server's reply in the model's words (see lockReply).
	Reply string
}

// lockState is the state of one key: free, or held by Owner Count times.
type lockState struct {
	Owner string
	Count int
}

// Replies as the model words them. Redisson's lock script replies nil when it
// acquires or re-enters and the holder's PTTL otherwise; its unlock replies
// nil to a non-owner, 0 while still held and 1 when released (also on a free
// key, in v2). SET NX replies OK or nil; compare-and-delete 1 or 0. A read
// replies the holder and count, or "free".
const (
	replyAcquired = "acquired"
	replyHeld     = "held by another"
	replyNotOwner = "not the owner"
	replyStill    = "still held"
	replyReleased = "released"
	replyFree     = "free"
)

func readReplyOf(s lockState) string {
	if s.Owner == "" {
		return replyFree
	}
	return fmt.Sprintf("%s x%d", s.Owner, s.Count)
}

// lockStep is the sequential specification: the state after op and the reply
// it must give.
func lockStep(s lockState, op lockOp) (lockState, string) {
	switch op.Kind {
	case opRead:
		return s, readReplyOf(s)
	case opAcquire:
		switch {
		case s.Owner == "":
			return lockState{op.Owner, 1}, replyAcquired
		case s.Owner == op.Owner && op.Style == styleRedisson:
			return lockState{s.Owner, s.Count + 1}, replyAcquired
		}
		return s, replyHeld
	}
	// Release.
	if op.Style == styleSetNX {
		if s.Owner == op.Owner {
			return lockState{}, replyReleased
		}
		return s, replyNotOwner
	}
	switch {
	case s.Owner == "":
		return s, replyReleased
	case s.Owner != op.Owner:
		return s, replyNotOwner
	case s.Count > 1:
		return lockState{s.Owner, s.Count - 1}, replyStill
	}
	return lockState{}, replyReleased
}

// lockModel is the porcupine model over lockStep, partitioned by key.
var lockModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(lockOp).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		parts := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			parts[i] = byKey[k]
		}
		return parts
	},
	Init: func() any { return lockState{} },
	Step: func(state, input, output any) (bool, any) {
		s, op, res := state.(lockState), input.(lockOp), output.(lockResult)
		next, reply := lockStep(s, op)
		switch res.Outcome {
		case outcomeFail:
			return true, s
		case outcomeUnknown:
			return true, next
		}
		return reply == res.Reply, next
	},
	Hash: func(state any) uint64 {
		s := state.(lockState)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d", s.Owner, s.Count)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string { return describeLockOp(input.(lockOp), output.(lockResult)) },
	DescribeState:     func(state any) string { return readReplyOf(state.(lockState)) },
}

func describeLockOp(op lockOp, res lockResult) string {
	var s string
	switch op.Kind {
	case opAcquire:
		s = fmt.Sprintf("acquire(%s, %s)", op.Key, op.Owner)
	case opRelease:
		s = fmt.Sprintf("release(%s, %s)", op.Key, op.Owner)
	default:
		s = fmt.Sprintf("read(%s)", op.Key)
	}
	switch res.Outcome {
	case outcomeFail:
		return s + " -> failed, nothing written"
	case outcomeUnknown:
		return s + " -> unknown outcome"
	}
	return s + " -> " + res.Reply
}

// Worked examples: the model accepts what a correct lock server may answer
// and rejects what loses a lock or lets two clients hold it.
func TestLockModel(t *testing.T) {
	acq := func(key, owner string, style lockStyle) lockOp {
		return lockOp{Kind: opAcquire, Style: style, Key: key, Owner: owner}
	}
	rel := func(key, owner string, style lockStyle) lockOp {
		return lockOp{Kind: opRelease, Style: style, Key: key, Owner: owner}
	}
	read := func(key string, style lockStyle) lockOp { return lockOp{Kind: opRead, Style: style, Key: key} }
	ok := func(reply string) lockResult { return lockResult{Reply: reply} }
	op := func(client int, in lockOp, call int64, out lockResult, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	r, s := styleRedisson, styleSetNX
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"sequential acquire, re-enter, release twice", []porcupine.Operation{
			op(0, acq("k", "A", r), 0, ok(replyAcquired), 1),
			op(0, acq("k", "A", r), 2, ok(replyAcquired), 3),
			op(1, acq("k", "B", r), 4, ok(replyHeld), 5),
			op(0, rel("k", "A", r), 6, ok(replyStill), 7),
			op(1, read("k", r), 8, ok("A x1"), 9),
			op(0, rel("k", "A", r), 10, ok(replyReleased), 11),
			op(1, acq("k", "B", r), 12, ok(replyAcquired), 13),
		}, true},
		{"two holders at once", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, ok(replyAcquired), 1),
			op(1, acq("k", "B", s), 2, ok(replyAcquired), 3),
		}, false},
		{"an acknowledged lock read back free (lost)", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, ok(replyAcquired), 1),
			op(1, read("k", s), 2, ok(replyFree), 3),
		}, false},
		{"concurrent acquires, either may win", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, ok(replyHeld), 10),
			op(1, acq("k", "B", s), 1, ok(replyAcquired), 9),
			op(2, read("k", s), 11, ok("B x1"), 12),
		}, true},
		{"a SET NX token is not re-entrant", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, ok(replyAcquired), 1),
			op(0, acq("k", "A", s), 2, ok(replyAcquired), 3),
		}, false},
		{"a failed acquire took no effect", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, lockResult{Outcome: outcomeFail}, 1),
			op(1, acq("k", "B", s), 2, ok(replyAcquired), 3),
		}, true},
		{"a failed acquire that did take effect", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, lockResult{Outcome: outcomeFail}, 1),
			op(1, read("k", s), 2, ok("A x1"), 3),
		}, false},
		{"an unknown acquire that took effect after later operations", []porcupine.Operation{
			op(0, acq("k", "A", r), 0, lockResult{Outcome: outcomeUnknown}, math.MaxInt64),
			op(1, read("k", r), 2, ok(replyFree), 3),
			op(1, acq("k", "B", r), 4, ok(replyAcquired), 5),
			op(1, rel("k", "B", r), 6, ok(replyReleased), 7),
			op(2, acq("k", "C", r), 8, ok(replyHeld), 9),
			op(2, read("k", r), 10, ok("A x1"), 11),
		}, true},
		{"an unknown acquire never explains a third holder", []porcupine.Operation{
			op(0, acq("k", "A", r), 0, lockResult{Outcome: outcomeUnknown}, math.MaxInt64),
			op(1, read("k", r), 2, ok("C x1"), 3),
		}, false},
		{"another owner's unlock does not release", []porcupine.Operation{
			op(0, acq("k", "A", s), 0, ok(replyAcquired), 1),
			op(1, rel("k", "B", s), 2, ok(replyReleased), 3),
		}, false},
		{"keys are independent", []porcupine.Operation{
			op(0, acq("k1", "A", s), 0, ok(replyAcquired), 1),
			op(1, acq("k2", "B", r), 0, ok(replyAcquired), 1),
			op(1, rel("k2", "B", r), 2, ok(replyReleased), 3),
			op(0, read("k1", s), 4, ok("A x1"), 5),
		}, true},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(lockModel, c.history); got != c.want {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.want)
		}
	}
}

// Worked examples of what the fault checks call a lock not held as
// acknowledged: a lock gone, or another's, while its lease cannot have run
// out; a lease left shorter than the time since allows, or longer than the
// lease. A short lease read back after a fault that outlasted it is neither
// (TestLockLoss counted a 5 s lease gone after an 8 s fault as lost).
func TestJudgeHeld(t *testing.T) {
	const s = time.Second
	l := heldLock{key: "k", owner: "a", lease: 5 * s}
	mine, free, other := lockState{Owner: "a", Count: 1}, lockState{}, lockState{Owner: "b", Count: 1}
	for _, c := range []struct {
		state         lockState
		pttl, elapsed time.Duration
		problem, lost bool
	}{
		{mine, 4 * s, 1 * s, false, false},
		{mine, 3900 * time.Millisecond, 1 * s, false, false}, // within the 250 ms and 1%
		{mine, 3 * s, 1 * s, true, false},                    // a second shorter than it may be
		{mine, 6 * s, 1 * s, true, false},                    // longer than the lease
		{free, -2 * time.Millisecond, 1 * s, true, true},
		{other, 5 * s, 1 * s, true, true},
		{free, -2 * time.Millisecond, 8 * s, false, false},                   // the lease ran out during the fault
		{other, 5 * s, 8 * s, false, false},                                  // and someone else took the key since
		{free, -2 * time.Millisecond, 4900 * time.Millisecond, false, false}, // it may have, by a clock 1% fast
		{free, -2 * time.Millisecond, 4600 * time.Millisecond, true, true},
		{mine, 6 * s, 8 * s, true, false},
	} {
		what, lost := judgeHeld(l, c.state, c.pttl, c.elapsed)
		if (what != "") != c.problem || lost != c.lost {
			t.Errorf("%+v read back with PTTL %v, %v after the acquire: %q, lost %v; want a problem %v, lost %v",
				c.state, c.pttl, c.elapsed, what, lost, c.problem, c.lost)
		}
	}
}

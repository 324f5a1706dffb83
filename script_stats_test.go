package lockserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The commands a script calls run in the state machine of every member, but
// count in INFO commandstats of the member whose client sent the script, as
// on one redis-server: through a follower, whose scripts the leader runs and
// whose replies carry the calls back, as through the leader. Members count
// no other member's clients' calls, so the members' figures add up to the
// cluster's. Only a script answered counts its calls: one whose outcome is
// unknown after a leader change counts none anywhere.
func TestClusterCountsScriptCalls(t *testing.T) {
	ms := startMembers(t, "")
	ctx := context.Background()
	const script = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])"
	answered := make([]int64, len(ms))
	for i, m := range ms {
		m.rdb.ConfigResetStat(ctx)
		for j := range 3 + i {
			key := fmt.Sprintf("k%d-%d", i, j)
			v, err := m.rdb.Eval(ctx, script, []string{key}, key).Result()
			switch {
			case err == nil && v == key:
				answered[i]++
			case err == nil:
				t.Fatalf("member %d: EVAL = %v, want %s", i, v, key)
			case !writeErr(err):
				t.Fatalf("member %d: EVAL: %v", i, err)
			}
		}
	}
	calls := func(m *member, cmd string) int64 {
		info, err := m.rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	for i, m := range ms {
		if answered[i] == 0 {
			t.Fatalf("member %d: no script answered", i)
		}
		for _, cmd := range []string{"set", "get"} {
			if got := calls(m, cmd); got != answered[i] {
				t.Errorf("member %d: cmdstat_%s calls=%d, want %d, one for each of its clients' scripts", i, cmd, got, answered[i])
			}
		}
		if got := calls(m, "eval"); got != int64(3+i) {
			t.Errorf("member %d: cmdstat_eval calls=%d, want %d", i, got, 3+i)
		}
	}
}

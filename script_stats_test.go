package lockserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/redis/go-redis/v9"
)

// The commands a script calls run in the state machine of every member, but
// count in INFO commandstats of the member whose client sent the script, as
// on one redis-server: through a follower, whose scripts the leader runs and
// whose replies carry the calls back, as through the leader. Members count
// no other member's clients' calls, so the members' figures add up to the
// cluster's. Only a script answered counts its calls: one whose outcome is
// unknown after a leader change counts none anywhere.
func TestClusterCountsScriptCalls(t *testing.T) {
	c := startMembers(t, "")
	ctx := context.Background()
	const script = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])"
	// A read-only script runs where the leader serves reads, and its calls
	// come back the same way.
	const readScript = "return redis.call('get', KEYS[1])"
	answered := make([]int64, len(c.Nodes))
	reads := make([]int64, len(c.Nodes))
	for i, m := range c.Nodes {
		m.Client().ConfigResetStat(ctx)
		for j := range 3 + i {
			key := fmt.Sprintf("k%d-%d", i, j)
			v, err := m.Client().Eval(ctx, script, []string{key}, key).Result()
			switch {
			case err == nil && v == key:
				answered[i]++
			case err == nil:
				t.Fatalf("member %d: EVAL = %v, want %s", i, v, key)
			case !clustertest.WriteErr(err):
				t.Fatalf("member %d: EVAL: %v", i, err)
			}
		}
		switch _, err := m.Client().EvalRO(ctx, readScript, []string{"k0-0"}).Result(); {
		case err == nil || err == redis.Nil:
			reads[i]++
		case !clustertest.WriteErr(err):
			t.Fatalf("member %d: EVAL_RO: %v", i, err)
		}
	}
	calls := func(m *embedded.Member, cmd string) int64 {
		info, err := m.Client().Info(ctx, "commandstats").Result()
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
	for i, m := range c.Nodes {
		if answered[i] == 0 {
			t.Fatalf("member %d: no script answered", i)
		}
		if got := calls(m, "set"); got != answered[i] {
			t.Errorf("member %d: cmdstat_set calls=%d, want %d, one for each of its clients' scripts", i, got, answered[i])
		}
		if got := calls(m, "get"); got != answered[i]+reads[i] {
			t.Errorf("member %d: cmdstat_get calls=%d, want %d, one for each of its clients' scripts and read-only scripts", i, got, answered[i]+reads[i])
		}
		// go-redis sends a command again after TRYAGAIN or CLUSTERDOWN.
		if got := calls(m, "eval_ro"); got < 1 {
			t.Errorf("member %d: cmdstat_eval_ro calls=%d, want at least 1", i, got)
		}
		if got := calls(m, "eval"); got < int64(3+i) {
			t.Errorf("member %d: cmdstat_eval calls=%d, want at least %d", i, got, 3+i)
		}
	}
}

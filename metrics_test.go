package lockserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/attempt"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// scrape fetches url and parses it as Prometheus's text format.
func scrape(t testing.TB, url string) families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

type families map[string]*dto.MetricFamily

// metric returns the series of family name whose labels include labels
// (name, value, name, value ...), or nil.
func (f families) metric(name string, labels ...string) *dto.Metric {
	fam := f[name]
	if fam == nil {
		return nil
	}
next:
	for _, m := range fam.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// value returns a counter's or gauge's value, -1 when the series is absent.
func (f families) value(name string, labels ...string) float64 {
	m := f.metric(name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The metrics move with the commands a client sends: each command's count,
// its histogram's count, its errors by code, the keys it made, the
// connections; and /healthz and /readyz answer.
func TestMetricsCountCommands(t *testing.T) {
	// A small script budget stops the runaway script below at once, also
	// under -race on a busy machine (go-redis gives up after 3 s).
	s := open(t, lockserver.Options{ScriptBudget: 10000})
	hs := httptest.NewServer(s.Handler(nil))
	defer hs.Close()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2})
	defer rdb.Close()

	before := scrape(t, hs.URL+"/metrics")
	for i := range 7 {
		if err := rdb.Set(ctx, "k"+string(rune('a'+i)), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Expire(ctx, "ka", time.Hour)
	for range 3 {
		rdb.Get(ctx, "ka")
	}
	for range 2 {
		if err := rdb.HSet(ctx, "ka", "f", "v").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			t.Fatalf("HSET on a string: %v", err)
		}
	}
	rdb.Do(ctx, "GET") // wrong arity: rejected
	sub := rdb.Subscribe(ctx, "news")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	// A script the budget stops.
	if err := rdb.Eval(ctx, "while true do end", nil).Err(); err == nil {
		t.Fatal("a script that never ends ended")
	}
	// Do, with no connection, counts too.
	if _, err := s.Do(ctx, "GET", "ka"); err != nil {
		t.Fatal(err)
	}

	m := scrape(t, hs.URL+"/metrics")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"lockserver_commands_total", []string{"command", "set"}, 7},
		{"lockserver_commands_total", []string{"command", "get"}, 4},
		{"lockserver_commands_total", []string{"command", "hset"}, 2},
		{"lockserver_commands_failed_total", []string{"command", "hset"}, 2},
		{"lockserver_commands_failed_total", []string{"command", "set"}, 0},
		{"lockserver_commands_rejected_total", []string{"command", "get"}, 1},
		{"lockserver_error_replies_total", []string{"command", "hset", "code", "WRONGTYPE"}, 2},
		{"lockserver_error_replies_total", []string{"command", "get", "code", "ERR"}, 1},
		{"lockserver_keys", []string{"db", "0"}, 7},
		{"lockserver_keys_with_expiry", []string{"db", "0"}, 1},
		{"lockserver_pubsub_channels", []string{"kind", "channel"}, 1},
		{"lockserver_pubsub_channels", []string{"kind", "pattern"}, 0},
		{"lockserver_oom_rejections_total", nil, 0},
		{"lockserver_scripts_cached", nil, 1},
		{"lockserver_scripts_budget_stopped_total", nil, 1},
		{"lockserver_commands_failed_total", []string{"command", "eval"}, 1},
	} {
		if got := m.value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if before.value("lockserver_commands_total", "command", "set") != -1 {
		t.Errorf("set counted before any was sent")
	}
	// The histograms count every call, in ascending buckets, the last of
	// them (+Inf) holding all.
	for cmd, n := range map[string]uint64{"set": 7, "get": 4, "hset": 2} {
		h := m.metric("lockserver_command_duration_seconds", "command", cmd).GetHistogram()
		if h.GetSampleCount() != n || h.GetSampleSum() <= 0 {
			t.Errorf("%s: histogram count %d sum %v, want %d and > 0", cmd, h.GetSampleCount(), h.GetSampleSum(), n)
		}
		var last uint64
		for _, b := range h.Bucket {
			if b.GetCumulativeCount() < last {
				t.Errorf("%s: buckets not cumulative: %v", cmd, h.Bucket)
			}
			last = b.GetCumulativeCount()
		}
		if last > n {
			t.Errorf("%s: a bucket counts %d of %d calls", cmd, last, n)
		}
	}
	// Connections: the client's two (commands, subscriber).
	if got := m.value("lockserver_connected_clients"); got != 2 {
		t.Errorf("connected clients %v, want 2", got)
	}
	if got := m.value("lockserver_connections_received_total"); got < 2 {
		t.Errorf("connections received %v, want 2 or more", got)
	}
	if code, body := get(t, hs.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, hs.URL+"/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
	// CONFIG RESETSTAT resets the counters, as it resets INFO's.
	rdb.ConfigResetStat(ctx)
	m = scrape(t, hs.URL+"/metrics")
	if got := m.value("lockserver_commands_total", "command", "set"); got != -1 && got != 0 {
		t.Errorf("after CONFIG RESETSTAT, set counted %v", got)
	}
	s.Close()
	if code, _ := get(t, hs.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz of a closed server: %d", code)
	}
}

// Two servers in one process report their own figures, also when they share
// a registry under a label each.
func TestMetricsOfTwoServersStayApart(t *testing.T) {
	a, b := open(t, lockserver.Options{Addr: "-"}), open(t, lockserver.Options{Addr: "-"})
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{"server": "a"}, reg).MustRegister(a.Collector())
	prometheus.WrapRegistererWith(prometheus.Labels{"server": "b"}, reg).MustRegister(b.Collector())
	hs := httptest.NewServer(a.Handler(reg))
	defer hs.Close()
	ctx := context.Background()
	for range 3 {
		a.Do(ctx, "SET", "x", "1")
	}
	b.Do(ctx, "SET", "x", "1")
	m := scrape(t, hs.URL+"/metrics")
	if got := m.value("lockserver_commands_total", "command", "set", "server", "a"); got != 3 {
		t.Errorf("server a: %v sets, want 3", got)
	}
	if got := m.value("lockserver_commands_total", "command", "set", "server", "b"); got != 1 {
		t.Errorf("server b: %v sets, want 1", got)
	}
	// Its own registry each, through Handler(nil).
	hb := httptest.NewServer(b.Handler(nil))
	defer hb.Close()
	if got := scrape(t, hb.URL+"/metrics").value("lockserver_commands_total", "command", "set"); got != 1 {
		t.Errorf("server b alone: %v sets, want 1", got)
	}
}

// The Raft figures of a 3-member cluster move through the loss of its
// leader: a member's state, term, indexes and leader changes, the new
// leader's commit times, batches and log writes, the followers' lag as the
// leader sees it, and a follower's forwarded requests.
func TestMetricsRaftThroughLeaderKill(t *testing.T) {
	testenv.Long(t)
	// Until the test stops the leader, an election voids the attempt.
	attempt.Run(t, func(t testing.TB) {
		c := startMembers(t, "")
		handlers := map[*embedded.Member]*httptest.Server{}
		for _, m := range c.Nodes {
			hs := httptest.NewServer(m.Server().Handler(nil))
			t.Cleanup(hs.Close)
			handlers[m] = hs
		}
		ctx := context.Background()
		leader := c.Leader(t)
		followers := c.Followers(leader)
		write := func(m *embedded.Member, n int) {
			for i := range n {
				clustertest.Eventually(t, "SET through "+m.ID(), func() error {
					return m.Client().Set(ctx, "key", i, 0).Err()
				})
			}
		}
		write(leader, 20)
		write(followers[0], 5)

		old := scrape(t, handlers[leader].URL+"/metrics")
		if old.value("lockserver_raft_state", "state", "leader") != 1 || old.value("lockserver_raft_has_leader") != 1 {
			t.Errorf("the leader's state: %v, has_leader %v", old.value("lockserver_raft_state", "state", "leader"), old.value("lockserver_raft_has_leader"))
		}
		commit := old.metric("lockserver_raft_proposal_commit_seconds").GetHistogram()
		apply := old.metric("lockserver_raft_proposal_apply_seconds").GetHistogram()
		if commit.GetSampleCount() < 20 || apply.GetSampleCount() != commit.GetSampleCount() {
			t.Errorf("the leader timed %d commits and %d applies of at least 20 writes", commit.GetSampleCount(), apply.GetSampleCount())
		}
		if n := old.metric("lockserver_raft_batch_proposals").GetHistogram().GetSampleCount(); n == 0 {
			t.Errorf("no batch counted")
		}
		if n := old.metric("lockserver_raft_log_write_seconds").GetHistogram().GetSampleCount(); n == 0 {
			t.Errorf("no log write timed")
		}
		if old.value("lockserver_raft_log_file_bytes", "file", "bolt") <= 0 || old.value("lockserver_raft_log_file_bytes", "file", "journal") <= 0 {
			t.Errorf("log files: bolt %v journal %v", old.value("lockserver_raft_log_file_bytes", "file", "bolt"), old.value("lockserver_raft_log_file_bytes", "file", "journal"))
		}
		// The leader asks the others their applied index over the member link.
		deadline := time.Now().Add(10 * time.Second)
		for _, f := range followers {
			id := f.ID()
			for old.value("lockserver_raft_follower_reachable", "member", id) != 1 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				old = scrape(t, handlers[leader].URL+"/metrics")
			}
			if lag := old.value("lockserver_raft_follower_lag_entries", "member", id); lag < 0 {
				t.Errorf("the leader reports no lag of %s", id)
			}
			if up := old.value("lockserver_raft_follower_reachable", "member", id); up != 1 {
				t.Errorf("%s reachable: %v", id, up)
			}
		}
		f0 := scrape(t, handlers[followers[0]].URL+"/metrics")
		if got := f0.value("lockserver_raft_forwarded_requests_total"); got < 5 {
			t.Errorf("follower forwarded %v requests, want at least 5", got)
		}
		if n := f0.metric("lockserver_raft_forward_seconds").GetHistogram().GetSampleCount(); n == 0 {
			t.Errorf("the follower timed no forwarded batch")
		}
		if f0.value("lockserver_raft_state", "state", "follower") != 1 {
			t.Errorf("follower's state series: %v", f0["lockserver_raft_state"])
		}
		before := map[*embedded.Member]families{}
		for _, f := range followers {
			before[f] = scrape(t, handlers[f].URL+"/metrics")
		}

		attempt.Own(t)
		leader.Stop()
		next := c.Leader(t, followers...)
		write(next, 10)
		for _, f := range followers {
			was, now := before[f], scrape(t, handlers[f].URL+"/metrics")
			id := f.ID()
			if now.value("lockserver_raft_term") <= was.value("lockserver_raft_term") {
				t.Errorf("%s: term %v -> %v through an election", id, was.value("lockserver_raft_term"), now.value("lockserver_raft_term"))
			}
			if now.value("lockserver_raft_leader_changes_total") <= was.value("lockserver_raft_leader_changes_total") {
				t.Errorf("%s: leader changes %v -> %v", id, was.value("lockserver_raft_leader_changes_total"), now.value("lockserver_raft_leader_changes_total"))
			}
			for _, idx := range []string{"lockserver_raft_commit_index", "lockserver_raft_applied_index", "lockserver_raft_last_log_index"} {
				if now.value(idx) < was.value(idx)+10 {
					t.Errorf("%s: %s %v -> %v after 10 writes", id, idx, was.value(idx), now.value(idx))
				}
			}
		}
		nm := scrape(t, handlers[next].URL+"/metrics")
		if nm.value("lockserver_raft_state", "state", "leader") != 1 {
			t.Errorf("the new leader's state: %v", nm["lockserver_raft_state"])
		}
		if n := nm.metric("lockserver_raft_proposal_commit_seconds").GetHistogram().GetSampleCount(); n < 10 {
			t.Errorf("the new leader timed %d commits of 10 writes", n)
		}
		// It cannot reach the stopped member.
		if up := nm.value("lockserver_raft_follower_reachable", "member", leader.ID()); up != 0 {
			t.Errorf("the stopped member's reachable: %v", up)
		}
	})
}

// Error codes are counted one by one up to 128, as Redis's errorstats, and
// the rest only in the total: a script can make up any number of codes, and
// each would be a line of INFO and a series of the metrics.
func TestErrorCodesAreBounded(t *testing.T) {
	s := open(t, lockserver.Options{})
	hs := httptest.NewServer(s.Handler(nil))
	defer hs.Close()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	errorReplies := func() int {
		stats := rdb.Info(ctx, "stats").Val()
		_, v, _ := strings.Cut(stats, "total_error_replies:")
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(v, "\r\n", 2)[0]))
		if err != nil {
			t.Fatalf("total_error_replies in %q: %v", stats, err)
		}
		return n
	}
	before := errorReplies()
	for i := range 200 {
		if _, err := s.Do(ctx, "EVAL", "return redis.error_reply(ARGV[1])", 0, "CODE"+strconv.Itoa(i)+" made up"); err == nil {
			t.Fatal("error_reply replied no error")
		}
	}
	if n := errorReplies() - before; n != 200 {
		t.Errorf("total_error_replies grew by %d, want 200", n)
	}
	info, err := rdb.Info(ctx, "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(info, "errorstat_"); n != 128 {
		t.Errorf("INFO errorstats has %d codes, want 128", n)
	}
	m := scrape(t, hs.URL+"/metrics")
	if n := len(m["lockserver_error_replies_total"].GetMetric()); n != 128 {
		t.Errorf("%d error series, want 128", n)
	}
}

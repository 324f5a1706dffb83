package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/freeport"
)

// grafanaPanel is a panel of the dashboard, or a row holding panels.
type grafanaPanel struct {
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// dashboardQueries returns every PromQL query of the dashboard: its panels'
// targets and its template variables' queries, each with where it is.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("grafana/lockserver-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	queries := map[string]string{}
	var walk func([]grafanaPanel)
	panels := 0
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			panels++
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: target %d has no expr", p.Title, i)
				}
				queries[fmt.Sprintf("panel %q, target %d", p.Title, i)] = tg.Expr
			}
		}
	}
	walk(d.Panels)
	if panels == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// A string, or an object whose query is the string.
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var o struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &o); err != nil {
				t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
			q = o.Query
		}
		if m := regexp.MustCompile(`^\s*label_values\(\s*([^,]+),`).FindStringSubmatch(q); m != nil {
			q = m[1] // the label's name is no metric's
		}
		queries["variable "+v.Name] = q
	}
	return queries
}

var (
	promStrings  = regexp.MustCompile(`"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|` + "`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVars  = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
		"group_left", "group_right", "inf", "nan", "atan2"}
)

// metricNames returns the metric names a PromQL expression selects: its
// identifiers that are not functions, aggregations, keywords or labels.
func metricNames(expr string) []string {
	for _, re := range []*regexp.Regexp{promStrings, promMatchers, promRanges, promGrouping, grafanaVars} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsRune("0123456789.", rune(expr[loc[0]-1])) {
			continue // the exponent of a number, as in 1e3
		}
		if strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " \t\n"), "(") {
			continue // a function or an aggregation
		}
		if slices.Contains(promKeywords, strings.ToLower(name)) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

// metricNames on worked examples.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{x="y}z", instance=~"$instance"}[$__rate_interval])))`: {"a_seconds_bucket"},
		`max by (member) (b) > 1e3`:                                        {"b"},
		`c{state="leader"} == 1 and on(instance) d offset 5m`:              {"c", "d"},
		`sum without (cpu) (rate(e_total[5m])) / ignoring(code) f_total`:   {"e_total", "f_total"},
		`count by (version, goversion) (g_info{instance=~"${instance}"})`:  {"g_info"},
		`increase(h_sum[1h]) / increase(h_count[1h])`:                      {"h_sum", "h_count"},
		`label_replace(i, "dst", "$1", "src", "(.*)") + bool 0.5`:          {"i"},
		`sum(rate(j:recorded:rate5m[5m])) or vector(0) unless absent(k{})`: {"j:recorded:rate5m", "k"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

// Every query of the Grafana dashboard names only metrics that the binary
// exports on --metrics-addr: those of a 3-member cluster's members, after
// commands that make every kind of figure appear (a forwarded write, a
// failed and a refused command).
func TestGrafanaDashboard(t *testing.T) {
	queries := dashboardQueries(t)
	want := map[string][]string{} // metric -> where
	for where, q := range queries {
		names := metricNames(q)
		if len(names) == 0 {
			t.Errorf("%s names no metric: %s", where, q)
		}
		for _, n := range names {
			want[n] = append(want[n], where)
		}
	}
	if t.Failed() {
		return
	}

	bin := clustertest.Binary(t)
	metricsAddr := map[string]string{}
	c := clustertest.StartProcs(t, bin, clustertest.ProcClusterOptions{Args: func(p *clustertest.Proc) []string {
		metricsAddr[p.ID()] = freeport.MustAddr(t)
		return []string{"--metrics-addr", metricsAddr[p.ID()]}
	}})
	leader := c.Leader(t)
	follower := c.Followers(leader)[0].Client()
	ctx := context.Background()
	clustertest.Eventually(t, "a write through a follower", func() error {
		return follower.Set(ctx, "lock:grafana", "owner-1", 0).Err()
	})
	if err := follower.Incr(ctx, "lock:grafana").Err(); err == nil {
		t.Fatal("INCR of a string that is no number succeeded")
	}
	if err := follower.Do(ctx, "GET").Err(); err == nil {
		t.Fatal("GET without a key succeeded")
	}

	exported := map[string]bool{}
	for _, p := range c.Nodes {
		resp, err := http.Get("http://" + metricsAddr[p.ID()] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /metrics: %s %v", p.ID(), resp.Status, err)
		}
		// Each sample line starts with its metric's name; a histogram's
		// are name_bucket, name_sum and name_count, as queries name them.
		for _, line := range strings.Split(string(body), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			exported[line[:strings.IndexAny(line, "{ ")]] = true
		}
	}
	var missing []string
	for name, where := range want {
		if !exported[name] {
			sort.Strings(where)
			missing = append(missing, fmt.Sprintf("%s (%s)", name, strings.Join(where, "; ")))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the dashboard queries %s, which no member exports", m)
	}
}

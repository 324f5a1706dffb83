// Package deploy tests the deployment files beside it, as far as a machine
// without Docker, Kubernetes or a running systemd can: README.md says what
// each test checks.
package deploy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// formWait bounds the wait for three new processes to elect a leader and
// agree on it, on a busy machine under -race.
const formWait = time.Minute

// stopWait bounds a member's clean stop after SIGTERM: what the deployments
// give it (terminationGracePeriodSeconds, stop_grace_period,
// TimeoutStopSec) and more.
const stopWait = time.Minute

// root is the repository's root, the Dockerfile's build context.
const root = ".."

// loopbacks returns n loopback addresses other than 127.0.0.1 (where a
// redis-server may listen) on each of which every port in ports is free:
// 127.0.0.<first>, <first+1>, ... or, when one is taken, the same in
// 127.0.1.0/24 and on.
func loopbacks(t *testing.T, first, n int, ports []string) []string {
	t.Helper()
	for net3 := 0; net3 < 16; net3++ {
		var ips []string
		free := true
		for i := range n {
			ip := fmt.Sprintf("127.0.%d.%d", net3, first+i)
			for _, port := range ports {
				ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
				if errors.Is(err, syscall.EADDRNOTAVAIL) {
					t.Skipf("skipping: this system has no loopback address %s (only Linux routes all of 127.0.0.0/8 to loopback)", ip)
				}
				if err != nil {
					free = false
					break
				}
				ln.Close()
			}
			ips = append(ips, ip)
		}
		if free {
			return ips
		}
	}
	t.Fatalf("no %d loopback addresses with ports %v free", n, ports)
	return nil
}

// hostPort matches a host:port in an argument, an environment value or a
// URL: after the start, "=", ",", "/" or a space.
var hostPort = regexp.MustCompile(`(^|[=,/\s])([A-Za-z0-9.-]+):([0-9]+)`)

// mapHosts rewrites every host:port in s whose host is a key of hosts to the
// address it maps to. It is how the tests give processes on one machine the
// network of a pod or a container: Go's resolver cannot be pointed elsewhere
// for one process, so a host name is replaced where it is written. A host
// left that is no IP address fails the test: the process would look it up.
//
// Each name must map to an address of its own: the server compares some
// addresses as written (a member's own --bootstrap entry with its
// --raft-advertise-addr), and two names mapped to one address would pass
// where the names differ. So a test maps the one name of a pod or service
// that the deployment writes, and a process's 0.0.0.0 (every address of its
// pod or container, reached by others) and its 127.0.0.1 (reached only from
// inside) to two different addresses.
func mapHosts(t *testing.T, s string, hosts map[string]string) string {
	t.Helper()
	return hostPort.ReplaceAllStringFunc(s, func(m string) string {
		sub := hostPort.FindStringSubmatch(m)
		host := sub[2]
		if ip, ok := hosts[host]; ok {
			host = ip
		} else if net.ParseIP(host) == nil {
			var mapped []string
			for h := range hosts {
				mapped = append(mapped, h)
			}
			slices.Sort(mapped)
			t.Fatalf("%q names host %s, which the test does not map to an address (it maps %q)", s, host, mapped)
		}
		return sub[1] + host + ":" + sub[3]
	})
}

// mapPath rewrites a path under one of mounts' keys (where a container sees
// a volume) to where the volume is on this machine, in s or in the value of
// s's "--flag=" or "NAME=".
func mapPath(s string, mounts map[string]string) string {
	prefix, value := "", s
	if i := strings.Index(s, "="); i >= 0 {
		prefix, value = s[:i+1], s[i+1:]
	}
	for in, out := range mounts {
		if value == in || strings.HasPrefix(value, in+"/") {
			return prefix + out + strings.TrimPrefix(value, in)
		}
	}
	return s
}

// listenPorts returns the ports of the 0.0.0.0:port addresses in args: where
// a process listens on every address of its pod or container.
func listenPorts(args []string) []string {
	var ports []string
	for _, a := range args {
		for _, m := range regexp.MustCompile(`0\.0\.0\.0:([0-9]+)`).FindAllStringSubmatch(a, -1) {
			if !slices.Contains(ports, m[1]) {
				ports = append(ports, m[1])
			}
		}
	}
	return ports
}

// flagValue returns the value of --name=value or --name value in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		a = "-" + strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v, true
		}
		if a == "-"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// checkEnvNames fails the test for a LOCKSERVER_ variable in env that is no
// flag's twin: the binary ignores it, so a misspelt one would go unnoticed.
func checkEnvNames(t *testing.T, bin string, env []string, where string) {
	t.Helper()
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		known["LOCKSERVER_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
	}
	if len(known) == 0 {
		t.Fatalf("%s --help lists no flags:\n%s", bin, out)
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LOCKSERVER_") && !known[name] {
			t.Errorf("%s sets %s, which is no flag's environment variable: the server ignores it", where, name)
		}
	}
}

// member is one lockserver process that a test started, as a deployment
// would: its arguments and environment are exactly those given, with
// nothing of the test's own environment.
type member struct {
	name  string
	cmd   *exec.Cmd
	log   string
	ended chan struct{}
	err   error
}

func startMember(t *testing.T, name string, argv, env []string) *member {
	t.Helper()
	m := &member{name: name, log: filepath.Join(t.TempDir(), name+".log"), ended: make(chan struct{})}
	f, err := os.Create(m.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "---- %q\n---- env %q\n", argv, redact(env))
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Env = env
	m.cmd.Stdout, m.cmd.Stderr = f, f
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.ended)
	}()
	t.Cleanup(func() {
		select {
		case <-m.ended:
		default:
			m.cmd.Process.Kill()
			<-m.ended
		}
		if t.Failed() {
			b, _ := os.ReadFile(m.log)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			t.Logf("%s: last lines of its output:\n%s", name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	return m
}

// redact hides the values of secrets in env, for the log.
func redact(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.Contains(name, "SECRET") || strings.Contains(name, "PASSWORD") {
			kv = name + "=(redacted)"
		}
		out = append(out, kv)
	}
	return out
}

// stop sends SIGTERM, as the kubelet, docker and systemd do, and fails the
// test unless the process then exits 0.
func (m *member) stop(t *testing.T) {
	t.Helper()
	select {
	case <-m.ended:
		t.Fatalf("%s ended before it was stopped: %v", m.name, m.err)
	default:
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.ended:
		if m.err != nil {
			t.Errorf("%s after SIGTERM: %v", m.name, m.err)
		}
	case <-time.After(stopWait):
		t.Errorf("%s still runs %v after SIGTERM", m.name, stopWait)
	}
}

// client returns a go-redis client of addr that gives up quickly, so that a
// wait can ask again.
func client(t *testing.T, addr, password string, tlsConfig *tls.Config) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, Password: password, TLSConfig: tlsConfig,
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		DisableIdentity: true, MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// waitCluster waits until the members, by node id, have elected a leader
// that each of them names, and the leader lists all of them, itself as
// leader and the others as voters; it returns the leader's id. Members that
// end meanwhile fail the test at once.
func waitCluster(t *testing.T, clients map[string]*redis.Client, procs []*member) string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(formWait)
	var last string
	for {
		for _, m := range procs {
			select {
			case <-m.ended:
				t.Fatalf("%s ended: %v", m.name, m.err)
			default:
			}
		}
		leader, why := formed(ctx, clients)
		if why == "" {
			return leader
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("the members formed no cluster within %v: %s", formWait, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// formed returns the leader's id, or why the members are no cluster yet.
func formed(ctx context.Context, clients map[string]*redis.Client) (leader, why string) {
	var states []string
	for id, c := range clients {
		v, err := c.Do(ctx, "LOCKSERVER", "STATUS").Result()
		if err != nil {
			return "", fmt.Sprintf("%s: LOCKSERVER STATUS: %v", id, err)
		}
		st, err := clustertest.ParseStatus(v)
		if err != nil {
			return "", fmt.Sprintf("%s: %v", id, err)
		}
		states = append(states, fmt.Sprintf("%s: %s, leader %q", id, st.State, st.Leader))
		if st.Leader == "" || leader != "" && st.Leader != leader {
			return "", strings.Join(states, "; ")
		}
		leader = st.Leader
	}
	lc, ok := clients[leader]
	if !ok {
		return "", fmt.Sprintf("they name %q, no member the test started", leader)
	}
	v, err := lc.Do(ctx, "LOCKSERVER", "MEMBERS").Result()
	if err != nil {
		return "", fmt.Sprintf("%s: LOCKSERVER MEMBERS: %v", leader, err)
	}
	rows, _ := v.([]any)
	roles := map[string]string{}
	for _, r := range rows {
		m, _ := r.(map[any]any)
		id, _ := m["id"].(string)
		roles[id], _ = m["role"].(string)
	}
	for id := range clients {
		want := "voter"
		if id == leader {
			want = "leader"
		}
		if roles[id] != want {
			return "", fmt.Sprintf("the leader %s lists members %v, want %s as %s", leader, roles, id, want)
		}
	}
	if len(roles) != len(clients) {
		return "", fmt.Sprintf("the leader %s lists members %v, want %d", leader, roles, len(clients))
	}
	return leader, ""
}

// checkWrite sets a key through the leader and reads it back through every
// member: the cluster replicates and serves.
func checkWrite(t *testing.T, clients map[string]*redis.Client, leader string) {
	t.Helper()
	ctx := context.Background()
	clustertest.Eventually(t, "SET on the leader", func() error {
		return clients[leader].Set(ctx, "deploy-test", "written-through-"+leader, 0).Err()
	})
	for id, c := range clients {
		clustertest.Eventually(t, "GET on "+id, func() error {
			got, err := c.Get(ctx, "deploy-test").Result()
			if err == nil && got != "written-through-"+leader {
				t.Fatalf("GET on %s = %q, want %q", id, got, "written-through-"+leader)
			}
			return err
		})
	}
}

// checkHTTP waits until url answers 200, as a probe asks it.
func checkHTTP(t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	clustertest.Eventually(t, "GET "+url, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	})
}

// readEnvFile reads a file of NAME=value lines, with # comments, as compose's
// env_file and systemd's EnvironmentFile read the files given here (neither
// quotes nor continues a line).
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.Contains(line, "=") || strings.ContainsAny(line, `"'\`) {
			t.Fatalf("%s: %q is not a plain NAME=value line", path, line)
		}
		env = append(env, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// setEnv returns env with name set to value, replacing an earlier setting.
func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(env, name+"="+value)
}

// getEnv returns the value of name in env: its last, as exec.Cmd uses.
func getEnv(env []string, name string) string {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

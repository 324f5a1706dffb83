package deploy

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/clustertest"
)

// unitFile is a systemd unit: each section's settings, in order.
type unitFile map[string][][2]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s: %q continues on the next line, which the test does not read", path, line)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: %q is no setting of a section", path, line)
			}
			u[section] = append(u[section], [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get returns the last value of a setting, which is the one systemd uses.
func (u unitFile) get(section, key string) string {
	v := ""
	for _, kv := range u[section] {
		if kv[0] == key {
			v = kv[1]
		}
	}
	return v
}

// The systemd unit passes systemd-analyze verify, where that is installed;
// its example environment file sets only flags the binary has; and the
// binary runs with the unit's command line and that file, its addresses
// mapped to loopback ones, until SIGTERM stops it cleanly.
func TestSystemd(t *testing.T) {
	const unitPath = "systemd/lockserver.service"
	u := readUnit(t, unitPath)
	for _, want := range [][3]string{
		{"Service", "Type", "simple"}, // the server does not notify systemd
		{"Service", "User", "lockserver"},
		{"Service", "StateDirectory", "lockserver"},
		{"Service", "Restart", "on-failure"},
		{"Service", "KillSignal", "SIGTERM"},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "NoNewPrivileges", "yes"},
	} {
		if got := u.get(want[0], want[1]); got != want[2] {
			t.Errorf("%s: [%s] %s=%q, want %q", unitPath, want[0], want[1], got, want[2])
		}
	}
	// The stop may take --shutdown-snapshot-timeout for its snapshot, after
	// the clients have drained and leadership has moved.
	stopSec := u.get("Service", "TimeoutStopSec")
	if _, err := strconv.Atoi(stopSec); err == nil {
		stopSec += "s" // systemd's unit for a bare number
	}
	stop, err := time.ParseDuration(stopSec)
	if err != nil || stop <= 5*time.Second {
		t.Errorf("%s: TimeoutStopSec=%q: want a duration well over --shutdown-snapshot-timeout's 5s", unitPath, u.get("Service", "TimeoutStopSec"))
	}
	exec0 := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec0) == 0 || !filepath.IsAbs(exec0[0]) {
		t.Fatalf("%s: ExecStart=%q: want an absolute path", unitPath, u.get("Service", "ExecStart"))
	}
	if dir, _ := flagValue(exec0[1:], "data-dir"); dir != "/var/lib/"+u.get("Service", "StateDirectory") {
		t.Errorf("%s: --data-dir %q is not the StateDirectory, the one place ProtectSystem=strict leaves writable", unitPath, dir)
	}
	envPath := filepath.Join("systemd", filepath.Base(u.get("Service", "EnvironmentFile")))
	env := readEnvFile(t, envPath)
	if t.Failed() {
		return
	}

	bin := clustertest.Binary(t)
	checkEnvNames(t, bin, env, envPath)

	if analyze, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze is not installed: the unit is not verified")
	} else {
		// verify wants the unit's program to exist: a copy of the unit runs
		// the binary just built.
		b, err := os.ReadFile(unitPath)
		if err != nil {
			t.Fatal(err)
		}
		unit := strings.Replace(string(b), "ExecStart="+exec0[0], "ExecStart="+bin, 1)
		copyPath := filepath.Join(t.TempDir(), filepath.Base(unitPath))
		if err := os.WriteFile(copyPath, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput()
		// It exits 0 on a setting it ignores, and says so.
		if err != nil || strings.Contains(string(out), filepath.Base(unitPath)) {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
		}
	}

	// The environment file is one member's of three: each host it names is
	// given a loopback address.
	var hosts []string
	var ports []string
	for _, kv := range env {
		for _, m := range hostPort.FindAllStringSubmatch(kv, -1) {
			if !slices.Contains(hosts, m[2]) {
				hosts = append(hosts, m[2])
			}
			if !slices.Contains(ports, m[3]) {
				ports = append(ports, m[3])
			}
		}
	}
	ips := loopbacks(t, 31, len(hosts), ports)
	addrs := map[string]string{}
	for i, h := range hosts {
		addrs[h] = ips[i]
	}
	mounts := map[string]string{"/var/lib/" + u.get("Service", "StateDirectory"): t.TempDir()}
	argv := []string{bin}
	for _, a := range exec0[1:] {
		argv = append(argv, mapPath(a, mounts))
	}
	var menv []string
	for _, kv := range env {
		menv = append(menv, mapPath(mapHosts(t, kv, addrs), mounts))
	}
	m := startMember(t, "systemd", argv, menv)
	c := client(t, getEnv(menv, "LOCKSERVER_ADDR"), getEnv(menv, "LOCKSERVER_PASSWORD"), nil)
	clustertest.Eventually(t, "PING", func() error { return c.Ping(context.Background()).Err() })
	checkHTTP(t, "http://"+getEnv(menv, "LOCKSERVER_METRICS_ADDR")+"/healthz")
	m.stop(t)
}

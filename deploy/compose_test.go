package deploy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"
)

// The parts of compose.yaml the test reads.
type (
	composeFile struct {
		Services map[string]composeService `yaml:"services"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	composeService struct {
		Build struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Entrypoint  []string   `yaml:"entrypoint"`
		Command     []string   `yaml:"command"`
		EnvFile     stringList `yaml:"env_file"`
		Environment yaml.Node  `yaml:"environment"`
		Volumes     []string   `yaml:"volumes"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		ReadOnly bool `yaml:"read_only"`
	}
)

// stringList is a compose field that is one string or a list of them.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	var v []string
	err := n.Decode(&v)
	*l = v
	return err
}

// environment returns a service's environment: a mapping or a list of
// NAME=value.
func (s composeService) environment(t *testing.T) []string {
	t.Helper()
	switch s.Environment.Kind {
	case 0:
		return nil
	case yaml.MappingNode:
		var m map[string]string
		if err := s.Environment.Decode(&m); err != nil {
			t.Fatal(err)
		}
		var env []string
		for k, v := range m {
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		return env
	default:
		var env []string
		if err := s.Environment.Decode(&env); err != nil {
			t.Fatal(err)
		}
		return env
	}
}

// The compose file's three services, each run as the binary with exactly
// its command and environment and with the certificates gen-certs.sh makes,
// form a cluster whose members link in mutual TLS, serve TLS clients that
// present the application's certificate, and pass their health check. The
// service names are mapped to loopback addresses, one per service.
func TestCompose(t *testing.T) {
	b, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(b, &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(cf.Services) != 3 {
		t.Fatalf("%d services, want 3", len(cf.Services))
	}
	var names []string
	for name, s := range cf.Services {
		names = append(names, name)
		df, err := filepath.Abs(filepath.Join("compose", s.Build.Context, s.Build.Dockerfile))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := filepath.Abs("Dockerfile"); df != want {
			t.Errorf("%s is built from %s, want %s", name, df, want)
		}
		if ctx, _ := filepath.Abs(filepath.Join("compose", s.Build.Context)); ctx != mustAbs(t, root) {
			t.Errorf("%s's build context is %s, want the repository's root", name, ctx)
		}
		if !s.ReadOnly {
			t.Errorf("%s's root file system is not read-only", name)
		}
		if v, _ := flagValue(s.Command, "tls-cluster"); v != "yes" {
			t.Errorf("%s's member links are not TLS: --tls-cluster is %q", name, v)
		}
	}
	sort.Strings(names)
	if t.Failed() {
		return
	}

	testenv.Long(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		testenv.Missing(t, "openssl is not installed (Debian: apt-get install openssl), which gen-certs.sh needs")
	}
	secrets := t.TempDir()
	if out, err := exec.Command("bash", "compose/gen-certs.sh", secrets).CombinedOutput(); err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, out)
	}
	// What compose.yaml names under ./secrets is where gen-certs.sh wrote.
	inSecrets := func(p string) string {
		rel, ok := strings.CutPrefix(p, "./secrets/")
		if !ok {
			t.Fatalf("compose.yaml names %s, not a file of ./secrets that gen-certs.sh makes", p)
		}
		return filepath.Join(secrets, rel)
	}

	im := buildImage(t)
	type service struct {
		argv, env []string
		mounts    map[string]string
	}
	services := map[string]*service{}
	var listen []string
	for _, name := range names {
		s := cf.Services[name]
		sv := &service{mounts: map[string]string{}}
		for _, f := range s.EnvFile {
			sv.env = append(sv.env, readEnvFile(t, inSecrets(f))...)
		}
		for _, kv := range s.environment(t) {
			k, v, _ := strings.Cut(kv, "=")
			sv.env = setEnv(sv.env, k, v)
		}
		sv.argv = im.entrypoint(t, s.Entrypoint, s.Command)
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("%s: volume %q: want source:target", name, v)
			}
			src, dst := parts[0], parts[1]
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				sv.mounts[dst] = inSecrets(src)
				if _, err := os.Stat(sv.mounts[dst]); err != nil {
					t.Fatalf("%s mounts %s, which gen-certs.sh did not make: %v", name, src, err)
				}
				continue
			}
			if _, ok := cf.Volumes[src]; !ok {
				t.Fatalf("%s mounts volume %s, which compose.yaml does not declare", name, src)
			}
			sv.mounts[dst] = t.TempDir()
		}
		listen = append(listen, listenPorts(sv.argv)...)
		services[name] = sv
	}
	checkEnvNames(t, im.bins[im.final.entrypoint[0]], services[names[0]].env, "compose.yaml")
	// Each service's address, and then each container's own loopback.
	ips := loopbacks(t, 21, 2*len(names), listen)

	ca, err := os.ReadFile(filepath.Join(secrets, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("ca.crt holds no certificate")
	}
	app, err := tls.LoadX509KeyPair(filepath.Join(secrets, "client.crt"), filepath.Join(secrets, "client.key"))
	if err != nil {
		t.Fatal(err)
	}

	clients := map[string]*redis.Client{}
	var procs []*member
	var health [][]string
	for i, name := range names {
		sv := services[name]
		hosts := map[string]string{"0.0.0.0": ips[i], "127.0.0.1": ips[len(names)+i]}
		for j, other := range names {
			hosts[other] = ips[j]
		}
		var argv, env []string
		for _, a := range sv.argv {
			argv = append(argv, mapPath(mapHosts(t, a, hosts), sv.mounts))
		}
		for _, kv := range sv.env {
			env = append(env, mapPath(mapHosts(t, kv, hosts), sv.mounts))
		}
		id, ok := flagValue(argv, "node-id")
		if !ok {
			t.Fatalf("%s has no --node-id", name)
		}
		addr, ok := flagValue(argv, "advertise-addr")
		if !ok {
			t.Fatalf("%s has no --advertise-addr, the address its clients are given", name)
		}
		procs = append(procs, startMember(t, name, argv, env))
		// A client names the member as compose's network does, by its
		// service: the member's certificate must hold that name.
		clients[id] = client(t, addr, getEnv(env, "LOCKSERVER_PASSWORD"),
			&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{app}, ServerName: name})

		hc := cf.Services[name].Healthcheck.Test
		if len(hc) < 2 || hc[0] != "CMD" {
			t.Fatalf("%s's health check is %q, want [CMD, program, ...]: the image has no shell", name, hc)
		}
		// Inside the container, 127.0.0.1 reaches what listens on 0.0.0.0.
		inside := map[string]string{"127.0.0.1": ips[i]}
		check := im.entrypoint(t, hc[1:2], hc[2:])
		for j := range check[1:] {
			check[1+j] = mapHosts(t, check[1+j], inside)
		}
		health = append(health, check)
	}

	leader := waitCluster(t, clients, procs)
	checkWrite(t, clients, leader)
	for id, c := range clients {
		plain := client(t, c.Options().Addr, c.Options().Password, nil)
		if err := plain.Ping(context.Background()).Err(); err == nil {
			t.Errorf("%s answers a client without TLS", id)
		}
	}
	for i, check := range health {
		clustertest.Eventually(t, names[i]+"'s health check", func() error {
			if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%q: %v: %s", check, err, out)
			}
			return nil
		})
	}
	for _, m := range procs {
		m.stop(t)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Command lockserver runs a Redis-compatible lock server.
//
// With no flags it listens on 127.0.0.1:6379 as a single node. Every flag can
// also be set through the environment: --max-clients is LOCKSERVER_MAX_CLIENTS.
// A flag on the command line wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		// The library's errors already name it.
		msg := err.Error()
		if !strings.HasPrefix(msg, "lockserver: ") {
			msg = "lockserver: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

// config is the command line, parsed.
type config struct {
	opts      lockserver.Options
	tls       tlsFlags
	logLevel  slog.Level
	logFormat string
	procs     int
	// metricsAddr is where /metrics, /healthz and /readyz are served over
	// HTTP; empty for nowhere.
	metricsAddr string
	// envNames are the environment variables of the flags.
	envNames map[string]bool
}

func parse(args []string, getenv func(string) string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("lockserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &cfg.opts
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:6379", "client `address` to listen on (RESP); empty for none (TLS clients only, with --tls-port)")
	fs.StringVar(&o.Password, "password", "", "require AUTH with this `password` (Redis's requirepass: the default user's password)")
	fs.Func("password-file", "read --password from this `file`, as a mounted secret holds it (one trailing newline is dropped)", secretFile(&o.Password))
	fs.StringVar(&o.ACLFile, "aclfile", "", "load the ACL users from this `file`, in Redis's format, which ACL LOAD and ACL SAVE read and write (--password is then ignored); a cluster's users are the cluster's, seeded by its first leader")
	fs.Var(natural[int]{&o.MaxClients}, "max-clients", "most concurrent client connections (0: 10000, Redis's default)")
	fs.Func("maxmemory", "refuse writes with OOM above this much live memory, e.g. 4gb (0: no limit)", sizeFlag(&o.MaxMemory))
	fs.Func("proto-max-bulk-len", "largest bulk string a client may send, e.g. 512mb", sizeFlag(&o.Limits.MaxBulk))
	fs.Func("protected-mode", "`yes` or no: with no password, answer clients from non-loopback addresses only with Redis's DENIED error (default yes)", func(v string) error {
		switch strings.ToLower(v) {
		case "yes":
			o.DisableProtectedMode = false
		case "no":
			o.DisableProtectedMode = true
		default:
			return errors.New("want yes or no")
		}
		return nil
	})
	fs.Var(natural[int64]{&o.ScriptBudget}, "script-budget", "steps a script may take: operations, or 16 bytes built or scanned; the same on every member (0: the default, 12000000)")
	fs.StringVar(&o.SentinelMaster, "sentinel-master", "", "master `name` the SENTINEL commands answer to, for clients configured for Redis Sentinel (empty: mymaster)")
	version := fs.Bool("version", false, "print the release this binary is, and exit")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn, error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "HTTP `address` serving Prometheus metrics (/metrics), /healthz and /readyz, e.g. 127.0.0.1:9121 (empty: none)")
	fs.Var(natural[int]{&cfg.procs}, "procs", "CPUs that run the server's code at once (0: one on a machine of two CPUs or fewer, else all; see docs/operations.md)")
	c := &o.Cluster
	fs.StringVar(&c.NodeID, "node-id", "", "run as the Raft cluster member with this `id` (unset: a single standalone node)")
	fs.StringVar(&c.RaftAddr, "raft-addr", "", "`host:port` of this member's Raft transport, which the other members reach")
	fs.Func("raft-advertise-addr", "`host:port` the other members reach this member's Raft transport at, when not --raft-addr (a proxy's, a NAT's)", func(s string) error {
		if err := checkHostPort(s); err != nil {
			return err
		}
		c.RaftAdvertiseAddr = s
		return nil
	})
	fs.StringVar(&c.DataDir, "data-dir", "", "`directory` for this member's Raft log and snapshots (empty: in memory, lost on exit)")
	fs.Func("bootstrap", "voters of a new cluster (this member among them, at its --raft-advertise-addr or else --raft-addr), as `id=raft-host:port,...`; used only with no data", peersFlag(&c.Bootstrap))
	fs.Func("join", "Raft `address` (host:port) of a member of an existing cluster to join, when there is no data (also after losing it)", func(s string) error {
		if err := checkHostPort(s); err != nil {
			return err
		}
		c.Join = s
		return nil
	})
	fs.DurationVar(&c.JoinTimeout, "join-timeout", time.Minute, "how long --join keeps asking before the process gives up and exits")
	fs.StringVar(&c.AdvertiseAddr, "advertise-addr", "", "client `address` the members give clients for this one (default: --addr, or the TLS address without it)")
	fs.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", time.Second, "how long a member hears from no leader before it stands for election (and a leader from no majority before it steps down)")
	fs.DurationVar(&c.ElectionTimeout, "election-timeout", time.Second, "how long an election may take before another starts; at least --heartbeat-timeout")
	fs.DurationVar(&c.ShutdownSnapshotTimeout, "shutdown-snapshot-timeout", 5*time.Second, "longest a member's stop spends on a snapshot (taken when much log was written since the last); past it the snapshot is abandoned and the restart replays the log")
	fs.StringVar(&c.Secret, "cluster-secret", "", "`secret` (16 bytes or more) that members prove to each other on every link; prefer LOCKSERVER_CLUSTER_SECRET or --cluster-secret-file, which ps does not show")
	fs.Func("cluster-secret-file", "read --cluster-secret from this `file`, as a mounted secret holds it (one trailing newline is dropped)", secretFile(&c.Secret))
	fs.StringVar(&c.Token, "cluster-token", "", "`token` that goes into a new cluster's identity, with the --bootstrap list: give each cluster its own")
	fs.BoolVar(&c.Insecure, "insecure-cluster", false, "let a member whose --raft-addr is not loopback start with neither --cluster-secret nor --tls-cluster: anyone who reaches its Raft port is then a member")
	t := &cfg.tls
	fs.StringVar(&t.port, "tls-port", "", "listen for TLS clients on this `port` of --addr's host (127.0.0.1 without --addr), or on host:port; 0 or empty: no TLS listener")
	fs.StringVar(&t.certFile, "tls-cert-file", "", "`file` (PEM) of this server's certificate, for TLS clients and, with --tls-cluster, for the other members")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "`file` (PEM) of the certificate's private key")
	fs.StringVar(&t.caFile, "tls-ca-cert-file", "", "`file` (PEM) of the CAs that clients' certificates, and members', must be issued by")
	fs.StringVar(&t.caDir, "tls-ca-cert-dir", "", "`directory` of such CA certificates (PEM files)")
	fs.StringVar(&t.authClients, "tls-auth-clients", "yes", "whether a TLS client must present a certificate: `yes`, no or optional")
	fs.StringVar(&t.protocols, "tls-protocols", "", "TLS `versions` to accept, e.g. \"TLSv1.2 TLSv1.3\" (default: both)")
	fs.StringVar(&t.ciphers, "tls-ciphers", "", "TLS 1.2 cipher `suites` to accept, IANA names separated by colons (default: Go's secure ones)")
	fs.StringVar(&t.ciphersuites, "tls-ciphersuites", "", "TLS 1.3 cipher `suites`: Go does not let them be chosen, so setting it is refused")
	fs.Func("tls-cluster", "`yes` or no: put every link between members in mutual TLS, with --tls-cert-file as each member's certificate and --tls-ca-cert-file as the cluster's CA (default no)", func(v string) error {
		switch strings.ToLower(v) {
		case "yes":
			t.cluster = true
		case "no":
			t.cluster = false
		default:
			return errors.New("want yes or no")
		}
		return nil
	})
	fs.StringVar(&t.clusterNames, "tls-cluster-names", "", "`pattern` (as '*.lock.internal') that a member's certificate's DNS names or common name must match, with --tls-cluster")
	fs.Usage = func() {}

	// The environment is read first and the command line over it, so that
	// the command line wins and a bad environment value is an error even
	// when a flag overrides it.
	envErr := setFromEnv(fs, getenv)
	cfg.envNames = map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { cfg.envNames[envName(f.Name)] = true })
	err := fs.Parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, helpRequest(usage(fs))
		}
		return nil, fmt.Errorf("%w\n%s", err, usage(fs))
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), usage(fs))
	}
	if *version {
		return nil, helpRequest(buildinfo.Describe() + "\n")
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range []string{"password", "cluster-secret"} {
		if (given[name] || getenv(envName(name)) != "") && (given[name+"-file"] || getenv(envName(name+"-file")) != "") {
			return nil, fmt.Errorf("--%s and --%s-file both give the %s: give one", name, name, strings.ReplaceAll(name, "-", " "))
		}
	}
	if envErr != nil {
		return nil, envErr
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"join-timeout", c.JoinTimeout}, {"heartbeat-timeout", c.HeartbeatTimeout}, {"election-timeout", c.ElectionTimeout}, {"shutdown-snapshot-timeout", c.ShutdownSnapshotTimeout}} {
		if d.v < 0 {
			return nil, fmt.Errorf("--%s must be 0 (the default) or more, not %v", d.flag, d.v)
		}
	}
	if cfg.logFormat != "text" && cfg.logFormat != "json" {
		return nil, fmt.Errorf("--log-format must be text or json, not %q", cfg.logFormat)
	}
	if c.NodeID == "" && (c.RaftAddr != "" || c.RaftAdvertiseAddr != "" || c.DataDir != "" || c.Bootstrap != nil || c.Join != "" || c.AdvertiseAddr != "" ||
		c.Secret != "" || c.Token != "" || c.Insecure || t.cluster) {
		return nil, errors.New("--raft-addr, --raft-advertise-addr, --data-dir, --bootstrap, --join, --advertise-addr and the --cluster-* and --tls-cluster flags need --node-id")
	}
	if c.NodeID != "" && c.RaftAddr == "" {
		return nil, errors.New("--node-id needs --raft-addr")
	}
	if c.Bootstrap != nil && c.Join != "" {
		return nil, errors.New("--bootstrap starts a new cluster and --join enters an existing one: give one")
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	if o.TLSAddr, err = t.addr(o.Addr); err != nil {
		return nil, err
	}
	if o.Addr == "" {
		if o.TLSAddr == "" {
			return nil, errors.New("--addr is empty and there is no --tls-port: the server would listen nowhere")
		}
		o.Addr = "-"
	}
	return cfg, nil
}

// addr is the address of the TLS listener: --tls-port's host:port, or its
// port on --addr's host; "" for none.
func (f *tlsFlags) addr(plain string) (string, error) {
	switch {
	case f.port == "" || f.port == "0":
		return "", nil
	case strings.Contains(f.port, ":"):
		return f.port, checkHostPort(f.port)
	}
	if _, err := strconv.ParseUint(f.port, 10, 16); err != nil {
		return "", fmt.Errorf("--tls-port: want a port or host:port, got %q", f.port)
	}
	host := "127.0.0.1"
	if h, _, err := net.SplitHostPort(plain); err == nil && h != "" {
		host = h
	}
	return net.JoinHostPort(host, f.port), nil
}

// helpRequest is parse's answer to -h or --help (the usage) and to
// --version: what to print to stdout before exiting.
type helpRequest string

func (h helpRequest) Error() string { return string(h) }

// natural is an integer flag that refuses a negative value, which the server
// would otherwise quietly take for its default.
type natural[T int | int64] struct{ p *T }

func (n natural[T]) String() string {
	if n.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*n.p), 10)
}

func (n natural[T]) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil || int64(T(v)) != v {
		return errors.New("not an integer in range")
	}
	if v < 0 {
		return errors.New("must be 0 or more")
	}
	*n.p = T(v)
	return nil
}

// secretFile reads a secret from a file into dst: its content, less one
// trailing newline (as echo and most secret stores leave one). An empty
// secret is refused rather than taken for none.
func secretFile(dst *string) func(string) error {
	return func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return fmt.Errorf("%s is empty", path)
		}
		*dst = v
		return nil
	}
}

// checkHostPort refuses an address another member could never be reached at.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("want host:port, got %q", addr)
	}
	return nil
}

// peersFlag parses a list of cluster voters: id=host:port,id=host:port.
func peersFlag(dst *[]lockserver.Peer) func(string) error {
	return func(s string) error {
		var peers []lockserver.Peer
		for _, item := range strings.Split(s, ",") {
			id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok || id == "" || checkHostPort(addr) != nil {
				return fmt.Errorf("want id=host:port, got %q", item)
			}
			peers = append(peers, lockserver.Peer{ID: id, RaftAddr: addr})
		}
		*dst = peers
		return nil
	}
}

// setFromEnv sets each of fs's flags that the environment sets, and
// returns the first value it refused.
func setFromEnv(fs *flag.FlagSet, getenv func(string) string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "version" {
			return // a question, not a setting: no environment twin
		}
		if v := getenv(envName(f.Name)); v != "" && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	return envErr
}

// unknownEnv returns the variables of environ named like a flag's
// (LOCKSERVER_...) that are no flag's: a misspelt setting, which the server
// would otherwise ignore without a word.
func unknownEnv(environ []string, known map[string]bool) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LOCKSERVER_") && !known[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// envName is the environment variable for a flag: max-clients -> LOCKSERVER_MAX_CLIENTS.
func envName(flagName string) string {
	return "LOCKSERVER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("usage: lockserver [flags]\n       lockserver backup|restore|inspect|recover [flags] ... (see lockserver backup -h, ...)\n\nflags (each also settable as LOCKSERVER_<FLAG> in the environment):\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

// sizeFlag parses a size the way redis.conf writes them: 1048576, 1mb, 1m, 1gb, 512k.
func sizeFlag(dst *int64) func(string) error {
	return func(s string) error {
		n, err := parseSize(s)
		if err != nil {
			return err
		}
		*dst = n
		return nil
	}
}

func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}}
	lower := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			lower, mult = strings.TrimSuffix(lower, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

// procs is how many Ps the server runs with: the --procs flag; else the
// runtime's choice when GOMAXPROCS was set; else one on a machine (or cgroup)
// of two CPUs or fewer, where the runtime would give two. Commands run one at a
// time under the state machine's lock, as on Redis's one thread, so a second P
// only adds parallel reads and writes of connections; on two CPUs shared with
// clients, it takes a core from them and wakes a second thread for each burst
// of ready connections, and redis-benchmark measured one faster (see
// bench/RESULTS.md). On more CPUs the spare ones pay.
//
// A cluster member on one P pays for it at each fsync of its log: the
// runtime's sysmon takes the P back from the syscall, hands it on and polls
// meanwhile. Two Ps measured slower on the bench's cluster all the same,
// on every member and on followers only.
func procs(flag int, envSet bool, runtimeDefault int) int {
	switch {
	case flag > 0:
		return flag
	case envSet || runtimeDefault > 2:
		return runtimeDefault
	default:
		return 1
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	var cfg *config
	var err error
	if len(args) > 0 && adminCommands[args[0]] != nil {
		err = adminCommands[args[0]](args[1:], os.Getenv, stdout, stderr)
	} else {
		cfg, err = parse(args, os.Getenv)
	}
	var help helpRequest
	if errors.As(err, &help) {
		_, err = io.WriteString(stdout, string(help))
		return err
	}
	if err != nil || cfg == nil {
		return err
	}
	hopts := &slog.HandlerOptions{Level: cfg.logLevel}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if cfg.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(handler)
	cfg.opts.Logger = log
	for _, name := range unknownEnv(os.Environ(), cfg.envNames) {
		log.Warn("ignoring an environment variable that sets no flag: misspelt?", "name", name)
	}
	// Set only on a change: setting it stops the runtime following a
	// container's CPU limit.
	if n := procs(cfg.procs, os.Getenv("GOMAXPROCS") != "", runtime.GOMAXPROCS(0)); n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}

	// Until it is open a signal ends the process as it would any other: a
	// join may wait a minute, and Ctrl-C must not. Once open, the signals
	// are caught before saying ready: a supervisor (or a test) may send
	// SIGTERM as soon as it reads that line, and it must drain, not kill.
	var certs *certFiles
	if cfg.tls.port != "" || cfg.tls.cluster {
		if certs, err = newCertFiles(&cfg.tls, log); err != nil {
			return err
		}
		if cfg.opts.TLSAddr != "" {
			cfg.opts.TLS = certs.clientConfig()
		}
		if cfg.tls.cluster {
			cfg.opts.Cluster.TLS = certs.memberTLS()
		}
	}
	s, err := lockserver.Open(cfg.opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var metrics *http.Server
	if cfg.metricsAddr != "" {
		if metrics, err = serveMetrics(cfg.metricsAddr, s, log); err != nil {
			s.Close()
			return err
		}
		defer metrics.Close()
	}
	// SIGHUP reads the certificates again, as a change of their files does.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log.Info("lockserver ready", "addr", s.Addr(), "tls_addr", s.TLSAddr(), "metrics_addr", cfg.metricsAddr, "pid", os.Getpid(), "procs", runtime.GOMAXPROCS(0))
	var fault error
	for done := false; !done; {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			done = true
		case fault = <-s.Fault():
			log.Error("shutting down: the node failed", "err", fault)
			done = true
		case <-hup:
			if certs == nil {
				log.Info("SIGHUP: no TLS certificates to read again")
			} else {
				certs.reload()
			}
		}
	}
	if err := errors.Join(fault, s.Close()); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// serveMetrics serves the server's Handler on addr, with the Go runtime's
// and the process's collectors beside the server's own.
func serveMetrics(addr string, s *lockserver.Server, log *slog.Logger) (*http.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	hs := &http.Server{Handler: s.Handler(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err)
		}
	}()
	return hs, nil
}

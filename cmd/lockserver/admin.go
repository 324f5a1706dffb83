package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/lockserver/lockserver"
)

// The offline and operator commands: lockserver backup, restore, inspect
// and recover (docs/operations.md). Their flags, too, may be set in the
// environment.
var adminCommands = map[string]func(args []string, getenv func(string) string, stdout, stderr io.Writer) error{
	"backup":  backupCommand,
	"restore": restoreCommand,
	"inspect": inspectCommand,
	"recover": recoverCommand,
}

// adminFlags parses args for the command name, whose positional arguments
// are named by operands; it returns them.
func adminFlags(fs *flag.FlagSet, name, operands string, args []string, getenv func(string) string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := setFromEnv(fs, getenv); err != nil {
		return nil, err
	}
	usage := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "usage: lockserver %s [flags] %s\n\nflags (each also settable as LOCKSERVER_<FLAG> in the environment):\n", name, operands)
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return b.String()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, helpRequest(usage())
		}
		return nil, fmt.Errorf("%w\n%s", err, usage())
	}
	want := len(strings.Fields(operands))
	if fs.NArg() != want {
		return nil, fmt.Errorf("%s takes %d argument(s) (%s), not %d\n%s", name, want, operands, fs.NArg(), usage())
	}
	return fs.Args(), nil
}

func backupCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "inspect" {
		return backupInspect(args[1:], getenv, stdout)
	}
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	o := lockserver.BackupOptions{}
	fs.StringVar(&o.To, "to", "", "`file` to write the backup to (required); written whole or not at all")
	fs.StringVar(&o.Username, "user", "", "ACL `user` to authenticate as (one allowed LOCKSERVER BACKUP)")
	fs.StringVar(&o.Password, "password", "", "`password` to authenticate with; prefer LOCKSERVER_PASSWORD, which ps does not show")
	useTLS := fs.Bool("tls", false, "connect with TLS")
	ca := fs.String("tls-ca-cert-file", "", "`file` (PEM) of the CA the server's certificate is issued by (default: the system's)")
	cert := fs.String("tls-cert-file", "", "`file` (PEM) of a client certificate, for servers that ask for one")
	key := fs.String("tls-key-file", "", "`file` (PEM) of its private key")
	serverName := fs.String("tls-server-name", "", "`name` the server's certificate must hold (default: the address's host)")
	pos, err := adminFlags(fs, "backup", "ADDR", args, getenv)
	if err != nil {
		return err
	}
	o.Addr = pos[0]
	if o.To == "" {
		return errors.New("backup needs --to FILE")
	}
	if *useTLS || *ca != "" || *cert != "" {
		if o.TLS, err = clientTLS(*ca, *cert, *key, *serverName); err != nil {
			return err
		}
	}
	var last time.Time
	o.Progress = func(n uint64) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "lockserver backup: %s received\n", megabytes(n))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	info, err := lockserver.Backup(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", o.To)
	printBackup(stdout, info)
	return nil
}

func megabytes(n uint64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// clientTLS is the TLS configuration of a client of the server.
func clientTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

func backupInspect(args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("backup inspect", flag.ContinueOnError)
	pos, err := adminFlags(fs, "backup inspect", "FILE", args, getenv)
	if err != nil {
		return err
	}
	info, err := lockserver.InspectBackup(pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: intact\n", pos[0])
	printBackup(stdout, info)
	return nil
}

func printBackup(w io.Writer, info lockserver.BackupInfo) {
	fmt.Fprintf(w, "cluster: %s\nindex: %d\nterm: %d\ncreated: %s\nbytes: %d\nsha256: %s\nepoch: %d\ncluster_version: %s\nkeys: %d\nlocks: %d (keys with a lease)\n",
		info.Cluster, info.Index, info.Term, info.Created.UTC().Format(time.RFC3339), info.Bytes, info.SHA256, info.Epoch, info.ClusterVersion, info.Keys, info.Leases)
}

func restoreCommand(args []string, getenv func(string) string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var o lockserver.RestoreOptions
	fs.StringVar(&o.From, "from", "", "backup `file` to restore (required)")
	fs.StringVar(&o.DataDir, "data-dir", "", "new member's data `directory`, absent or empty (required)")
	fs.StringVar(&o.NodeID, "node-id", "", "the new member's `id` (required)")
	fs.Func("bootstrap", "voters of the new cluster, this member among them, as `id=raft-host:port,...`: the same on every member restored (required)", peersFlag(&o.Bootstrap))
	fs.StringVar(&o.ClusterToken, "cluster-token", "", "`token` that goes into the new cluster's identity, the same on every member restored")
	if _, err := adminFlags(fs, "restore", "", args, getenv); err != nil {
		return err
	}
	if o.From == "" || o.DataDir == "" || o.NodeID == "" || o.Bootstrap == nil {
		return errors.New("restore needs --from, --data-dir, --node-id and --bootstrap")
	}
	info, err := lockserver.Restore(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s into %s as member %s of a new cluster, at index %d, epoch %d (the backup's %d)\n"+
		"start it with --node-id %s --data-dir %s and its Raft address as in --bootstrap; restore the other voters alike\n",
		o.From, o.DataDir, o.NodeID, info.Index, info.Epoch+1, info.Epoch, o.NodeID, o.DataDir)
	return nil
}

func inspectCommand(args []string, getenv func(string) string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	dir := fs.String("data-dir", "", "data `directory` of a stopped member (required)")
	if _, err := adminFlags(fs, "inspect", "", args, getenv); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("inspect needs --data-dir")
	}
	info, err := lockserver.InspectDataDir(*dir)
	if err != nil {
		return err
	}
	printDir(stdout, info)
	return nil
}

func printDir(w io.Writer, info lockserver.DataDirInfo) {
	fmt.Fprintf(w, "cluster: %s\nlast_index: %d\nlast_term: %d\ncurrent_term: %d\nsnapshot_index: %d (applied at least up to)\n",
		info.Cluster, info.LastIndex, info.LastTerm, info.CurrentTerm, info.SnapshotIndex)
	for _, m := range info.Members {
		role := "voter"
		if !m.Voter {
			role = "nonvoter"
		}
		fmt.Fprintf(w, "member: %s %s %s\n", m.ID, m.RaftAddr, role)
	}
}

func recoverCommand(args []string, getenv func(string) string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	var o lockserver.RecoverOptions
	fs.StringVar(&o.DataDir, "data-dir", "", "data `directory` of the stopped survivor (required)")
	fs.StringVar(&o.NodeID, "node-id", "", "the survivor's `id` (required)")
	fs.StringVar(&o.RaftAddr, "raft-addr", "", "`host:port` the other members reach its Raft transport at once it runs (its --raft-advertise-addr, else --raft-addr; required)")
	if _, err := adminFlags(fs, "recover", "", args, getenv); err != nil {
		return err
	}
	if o.DataDir == "" || o.NodeID == "" || o.RaftAddr == "" {
		return errors.New("recover needs --data-dir, --node-id and --raft-addr")
	}
	if err := checkHostPort(o.RaftAddr); err != nil {
		return fmt.Errorf("--raft-addr: %w", err)
	}
	before, err := lockserver.Recover(o)
	if err != nil {
		return err
	}
	after, err := lockserver.InspectDataDir(o.DataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recovered %s: member %s is now the one voter of a new cluster %s (was %s)\n"+
		"it holds every entry its log held, up to index %d of term %d, committed or not; entries it never had are lost,\n"+
		"and its fencing tokens are of the next epoch, above every token issued before\n"+
		"start it as before (no --bootstrap), then start the other members with empty data directories and --join %s\n",
		o.DataDir, o.NodeID, after.Cluster, before.Cluster, before.LastIndex, before.LastTerm, o.RaftAddr)
	return nil
}

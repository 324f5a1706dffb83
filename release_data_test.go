package lockserver_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/freeport"
	"github.com/lockserver/lockserver/internal/lockscripts"
	"github.com/redis/go-redis/v9"
)

var generateReleaseData = flag.Bool("release-data.generate", false,
	"write testdata's data directory of the previous release, with that release's binary (clustertest.PreviousRelease)")

// releaseDataArchive is the data directory of a one-member cluster that the
// previous release wrote: a snapshot, and log written after it.
const releaseDataArchive = "testdata/release-0.1-member.tar.gz"

// century is a lease that outlives the test data: 100 years, in ms.
const century = 100 * 365 * 24 * 3600 * 1000

// What the previous release wrote, before and after its snapshot; every
// value is read back by this build.
var releaseWrites = [][]any{
	{"SET", "golden:plain", "v"},
	{"SET", "golden:setnx", "token-1", "NX", "PX", century},
	{"INCR", "golden:counter"}, {"INCR", "golden:counter"}, {"INCR", "golden:counter"},
	{"HSET", "golden:hash", "f", "v"},
	{"RPUSH", "golden:list", "a", "b"},
	{"SADD", "golden:set", "x"},
	{"ZADD", "golden:zset", "1.5", "m"},
	{"SCRIPT", "LOAD", "return 'golden'"},
	{"ACL", "SETUSER", "golden", "on", ">golden-password", "~golden:*", "+get"},
	{"LOCKSERVER", "SNAPSHOT"},
	{"SET", "golden:after-snapshot", "1"},
	{"INCR", "golden:counter"},
}

// This build opens the data directory of a member of the previous release
// and finds every write that release acknowledged: from its snapshot and
// from the log after it.
func TestPreviousReleaseDataOpens(t *testing.T) {
	if *generateReleaseData {
		writeReleaseData(t)
	}
	dir := t.TempDir()
	extract(t, releaseDataArchive, dir)
	s, err := lockserver.Open(lockserver.Options{Cluster: lockserver.ClusterOptions{
		NodeID: "golden", RaftAddr: freeport.MustAddr(t), DataDir: filepath.Join(dir, "data"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	clustertest.Eventually(t, "the member leads", func() error { return rdb.Set(ctx, "golden:now", "1", 0).Err() })

	redissonLock := lockscripts.MustSource(t, "redisson_lock.lua")
	for _, c := range []struct {
		cmd  []any
		want string
	}{
		{[]any{"GET", "golden:plain"}, "v"},
		{[]any{"GET", "golden:setnx"}, "token-1"},
		{[]any{"GET", "golden:counter"}, "4"},
		{[]any{"HGET", "golden:hash", "f"}, "v"},
		{[]any{"LRANGE", "golden:list", "0", "-1"}, "[a b]"},
		{[]any{"SMEMBERS", "golden:set"}, "[x]"},
		{[]any{"ZSCORE", "golden:zset", "m"}, "1.5"},
		{[]any{"GET", "golden:after-snapshot"}, "1"},
		// Held by owner-1, whose attempt gets nil; another owner gets the
		// lease left.
		{[]any{"EVAL", redissonLock, "1", "golden:redisson", century, "owner-1:1"}, "<nil>"},
		{[]any{"HGET", "golden:redisson", "owner-1:1"}, "2"},
		{[]any{"EVALSHA", sha1Hex("return 'golden'"), "0"}, "golden"},
		{[]any{"ACL", "DRYRUN", "golden", "GET", "golden:plain"}, "OK"},
		{[]any{"LOCKSERVER", "STATUS"}, ""},
	} {
		v, err := rdb.Do(ctx, c.cmd...).Result()
		got := fmt.Sprint(v)
		if err != nil && err != redis.Nil {
			got = err.Error()
		}
		if c.cmd[0] == "LOCKSERVER" {
			if cv := v.(map[any]any)["cluster_version"]; cv != buildinfo.Oldest.String() {
				t.Errorf("the previous release's log recorded no cluster version, yet this build reports %v", cv)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%v = %s, want %s", c.cmd, got, c.want)
		}
	}
	if pttl := rdb.PTTL(ctx, "golden:setnx").Val(); pttl < 50*365*24*time.Hour {
		t.Errorf("the lease written with a century left has %v left", pttl)
	}
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// writeReleaseData runs the previous release as a one-member cluster, sends
// it releaseWrites and a Redisson lock, stops it, and writes its data
// directory to releaseDataArchive.
func writeReleaseData(t *testing.T) {
	bin, version := clustertest.PreviousRelease(t)
	if want := "v" + buildinfo.Oldest.String(); !strings.HasPrefix(version, want) {
		t.Fatalf("the previous release is %s; %s names %s's data", version, releaseDataArchive, want)
	}
	dir := t.TempDir()
	p := clustertest.NewProc(t, bin, "golden", clustertest.ProcOptions{Dir: filepath.Join(dir, "data")})
	p.Args = p.MemberArgs()
	p.Start(t)
	ctx := context.Background()
	rdb := p.Client()
	clustertest.Eventually(t, "the member leads", func() error { return rdb.Set(ctx, "golden:first", "1", 0).Err() })
	lock := lockscripts.MustSource(t, "redisson_lock.lua")
	if err := rdb.Do(ctx, "EVAL", lock, "1", "golden:redisson", century, "owner-1:1").Err(); err != redis.Nil {
		t.Fatalf("the Redisson lock: %v", err)
	}
	for _, w := range releaseWrites {
		if err := rdb.Do(ctx, w...).Err(); err != nil {
			t.Fatalf("%v: %v", w, err)
		}
	}
	p.Stop(t)
	writeArchive(t, dir, releaseDataArchive)
	t.Logf("wrote %s with %s", releaseDataArchive, version)
}

// writeArchive writes the files under dir to a gzipped tar at path.
func writeArchive(t *testing.T, dir, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// extract writes the files of the gzipped tar at path under dir.
func extract(t *testing.T, path, dir string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(name, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
}

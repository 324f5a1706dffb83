package lockserver_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/testlog"
	"github.com/redis/go-redis/v9"
)

// One structured line for each client refused or dropped, each refusal for
// maxmemory (at most one a second) and each slow script, with the fields an
// operator filters on.
func TestOperatorLogs(t *testing.T) {
	logs := &testlog.Buffer{}
	s := open(t, lockserver.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// A second client at maxclients 1.
	if err := rdb.ConfigSet(ctx, "maxclients", "1").Err(); err != nil {
		t.Fatal(err)
	}
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := extra.Read(buf)
	extra.Close()
	if !strings.HasPrefix(string(buf[:n]), "-ERR max number of clients reached") {
		t.Fatalf("the second client read %q", buf[:n])
	}
	if ev := logs.Events("client_refused"); len(ev) != 1 || ev[0]["reason"] != "maxclients" || ev[0]["client"] == "" {
		t.Errorf("client_refused lines: %v", ev)
	}

	rdb.ConfigSet(ctx, "maxclients", "10000")

	// A protocol error.
	bad, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	bad.Write([]byte("*1\r\n$x\r\n"))
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ = bad.Read(buf)
	bad.Close()
	if !strings.HasPrefix(string(buf[:n]), "-ERR Protocol error") {
		t.Fatalf("the bad client read %q", buf[:n])
	}
	if ev := logs.Events("client_dropped"); len(ev) != 1 || ev[0]["reason"] != "protocol_error" || ev[0]["client_id"] == nil {
		t.Errorf("client_dropped lines: %v", ev)
	}

	// OOM refusals: three, one line.
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := rdb.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
			t.Fatalf("SET over maxmemory: %v", err)
		}
	}
	if ev := logs.Events("command_refused"); len(ev) != 1 || ev[0]["reason"] != "oom" || ev[0]["command"] != "set" {
		t.Errorf("command_refused lines: %v", ev)
	}
	rdb.ConfigSet(ctx, "maxmemory", "0")

	// A slow script, by its SHA1.
	rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0")
	body := "return 1"
	if err := rdb.Eval(ctx, body, nil).Err(); err != nil {
		t.Fatal(err)
	}
	if ev := logs.Events("slow_script"); len(ev) != 1 || ev[0]["sha1"] != "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" {
		t.Errorf("slow_script lines: %v", ev)
	}
}

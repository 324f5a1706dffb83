package compat_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockserver/lockserver/internal/testenv"
)

// client-output-buffer-limit as redis-server 7.0 takes and shows it: the
// defaults, classes set alone or together (replica as slave, any case),
// units, a value too large for 64 bits, and the errors.
func TestDiffOutputBufferLimitConfig(t *testing.T) {
	p := newPair(t)
	get := []string{"CONFIG", "GET", "client-output-buffer-limit"}
	p.Do(get...)
	for _, v := range []string{
		"wrong number", "invalid_class 10mb 10mb 60", "master 10mb 10mb 60",
		"normal 10mbs 10mb 60", "normal 10mb 10mbs 60", "normal 10mb 10mb 60s",
		"normal 10mb 10mb -1", "normal -1 0 0", "normal 1.5mb 0 0", "normal 1 2",
		"replica 1mb 2mb 3 pubsub 1gb 1k 5", "NORMAL 1 2 3", "", "pubsub 1KB 2M 0 slave 3Gb 4g 7",
		"normal 18446744073709551616 0 0", "normal mb 0 0", "normal 0 0 0 bogus 1 2 3",
	} {
		p.Do("CONFIG", "SET", "client-output-buffer-limit", v)
		p.Do(get...)
	}
	p.Do("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
	p.Do(get...)
}

// A subscriber that reads nothing while messages are published to it
// (Redis's own obuf-limits test): CLIENT LIST shows its queued output in
// omem, and with a hard pub/sub limit of 100,000 bytes both servers close
// it, omem never far above the limit.
func TestDiffOutputBufferLimitClosesSubscriber(t *testing.T) {
	testenv.Long(t)
	p := newPair(t)
	p.Do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 100000 0 0")
	for _, srv := range []struct {
		name   string
		admin  *rawClient
		subscr func() *rawClient
	}{
		{"redis-server", p.redis, func() *rawClient { return dialRaw(t, p.redisAddr) }},
		{"lockserver", p.ls, func() *rawClient { return dialRaw(t, p.lockserver.Addr()) }},
	} {
		sub := srv.subscr()
		sub.Do("SUBSCRIBE", "foo")
		most := 0
		closed := false
		for i := 0; i < 1_000_000 && !closed; i++ {
			if srv.admin.Do("PUBLISH", "foo", "bar") == ":0\r\n" {
				closed = true
				break
			}
			if i%100 != 0 {
				continue
			}
			list := srv.admin.Do("CLIENT", "LIST", "TYPE", "pubsub")
			if !strings.Contains(list, "id=") {
				closed = true
				break
			}
			most = max(most, clientField(t, list, "omem"))
		}
		if !closed {
			t.Errorf("%s: the subscriber was not closed (omem up to %d)", srv.name, most)
		}
		if most >= 200_000 {
			t.Errorf("%s: omem reached %d, past the limit of 100000", srv.name, most)
		}
		// Its connection is closed.
		sub.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 1<<16)
		var err error
		for err == nil {
			_, err = sub.conn.Read(buf)
		}
		if strings.Contains(err.Error(), "timeout") {
			t.Errorf("%s: the subscriber's connection is still open", srv.name)
		}
	}
	p.Do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 33554432 8388608 60")
}

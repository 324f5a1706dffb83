package compat_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/redisson"
	"github.com/redis/go-redis/v9"
)

// The ACL rules a lock client needs, as docs/compatibility.md gives them:
// each client's locks under lock:, and exactly the commands the client sends and its
// scripts call. Each set is run with the real client against redis-server
// and lockserver below: the client's locks work, and nothing else does.
var lockUserRules = map[string][]string{
	// redsync v4: SET NX PX to lock; its unlock and extend scripts, by
	// EVALSHA then EVAL, call GET, DEL, PEXPIRE and SET.
	"redsync": {"~lock:*", "-@all", "+set", "+get", "+del", "+pexpire", "+evalsha", "+eval"},
	// bsm/redislock: its scripts, by EVALSHA then EVAL, call SET, GET,
	// GETRANGE, DEL, PEXPIRE and PTTL.
	"redislock": {"~lock:*", "-@all", "+set", "+get", "+getrange", "+del", "+pexpire", "+pttl", "+evalsha", "+eval"},
	// redis-py's Lock: SET NX PX to acquire, GET (locked, owned); its
	// scripts, by EVALSHA and SCRIPT LOAD on NOSCRIPT, call GET, DEL,
	// PEXPIRE and PTTL.
	"redis-py": {"~lock:*", "-@all", "+set", "+get", "+del", "+pexpire", "+pttl", "+evalsha", "+script|load"},
	// Redisson's RLock with its watchdog: scripts by EVALSHA and SCRIPT LOAD
	// on NOSCRIPT (EXISTS, HINCRBY, HEXISTS, PEXPIRE, PTTL, DEL, GET, SET,
	// PUBLISH), whose keys are the lock, its unlock latches and its unlock
	// channel, which is also published to; SUBSCRIBE and UNSUBSCRIBE for
	// waiters, PING to keep connections alive.
	"redisson": {"~lock:*", "~redisson_unlock_latch:{lock:*", "~redisson_lock__channel:{lock:*", "&redisson_lock__channel:{lock:*", "-@all",
		"+evalsha", "+script|load", "+exists", "+hincrby", "+hexists", "+pexpire", "+pttl", "+del", "+get", "+set",
		"+publish", "+subscribe", "+unsubscribe", "+ping"},
}

// lockUserPass is every lock user's password in these tests.
const lockUserPass = "lock-pw"

// setLockUser creates the lock user of client on the server behind c.
func setLockUser(t testing.TB, c *rawClient, client string) {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", client, "on", ">" + lockUserPass}, lockUserRules[client]...)
	if r := c.Do(args...); r != "+OK\r\n" {
		t.Fatalf("ACL SETUSER %s: %q", client, r)
	}
}

// lockUserTargets returns a redis-server and a standalone lockserver with the
// lock user of client.
func lockUserTargets(t testing.TB, client string) []clientTarget {
	targets := []clientTarget{redisTarget(t, ""), lockserverTarget(t, "")}
	for _, tg := range targets {
		setLockUser(t, dialRaw(t, tg.addr), client)
	}
	return targets
}

// isNoPerm reports whether err is an ACL refusal: NOPERM, or a script's
// redis.call refused.
func isNoPerm(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "The user executing the script"))
}

// refusedAsLockUser runs, as a lock user, what a lock client must not be
// able to do, and logs how each is refused.
func refusedAsLockUser(ctx context.Context, rdb *redis.Client) clientLog {
	var log clientLog
	for _, args := range [][]any{
		{"get", "orders"}, {"set", "orders", "x"}, {"del", "orders"}, {"keys", "*"}, {"flushall"},
		{"config", "get", "maxmemory"}, {"client", "list"}, {"acl", "list"}, {"hset", "lock:h", "f", "v"},
		{"eval", "return redis.call('get', 'orders')", "0"}, {"publish", "news", "x"}, {"info"},
	} {
		err := rdb.Do(ctx, args...).Err()
		log.addf("%v refused with NOPERM: %v", args, isNoPerm(err))
	}
	return log
}

// TestACLLockUserGoClients runs redsync and redislock, through go-redis
// authenticated as each client's lock user (Options.Username), against
// redis-server and lockserver: every lock operation works, what the clients
// report is the same on both, and anything else is refused.
func TestACLLockUserGoClients(t *testing.T) {
	sessions := map[string]struct {
		run  func(t testing.TB, user, admin *redis.Client) clientLog
		want clientLog // what the client reports, worked from its documentation
	}{
		"redsync": {redsyncLockUser, clientLog{
			"Lock: ok", "stored: true", "rival TryLock: ErrTaken[0]", "Extend: true ok",
			"Unlock: true ok", "gone: true", "Lock of another prefix: NOPERM true"}},
		"redislock": {redislockLockUser, clientLog{
			"Obtain: ok", "Obtain of a held lock: ErrNotObtained", "Obtain with the holder's token: ok",
			"Refresh: ok", "TTL: true ok", "Release: ok", "gone: true", "Obtain of another prefix: NOPERM true"}},
	}
	for client, session := range sessions {
		t.Run(client, func(t *testing.T) {
			for _, tg := range lockUserTargets(t, client) {
				user := tg.goRedis(t, redis.Options{Username: client, Password: lockUserPass})
				admin := tg.goRedis(t, redis.Options{})
				compareLogs(t, "the worked example", session.want, tg.name, session.run(t, user, admin))
				for _, line := range refusedAsLockUser(context.Background(), user) {
					if !strings.HasSuffix(line, "true") {
						t.Errorf("%s: %s", tg.name, line)
					}
				}
			}
		})
	}
}

// redsyncLockUser locks, extends and unlocks with redsync as its lock user;
// admin, the default user, checks what is stored.
func redsyncLockUser(t testing.TB, user, admin *redis.Client) clientLog {
	ctx := context.Background()
	var log clientLog
	rs := redsync.New(goredis.NewPool(user))
	opts := []redsync.Option{redsync.WithExpiry(5 * time.Second), redsync.WithTries(1)}
	m := rs.NewMutex("lock:orders", opts...)
	log.addf("Lock: %s", redsyncErr(m.Lock()))
	log.addf("stored: %v", admin.Get(ctx, "lock:orders").Val() == m.Value())
	log.addf("rival TryLock: %s", redsyncErr(rs.NewMutex("lock:orders", opts...).TryLock()))
	ok, err := m.Extend()
	log.addf("Extend: %v %s", ok, redsyncErr(err))
	ok, err = m.Unlock()
	log.addf("Unlock: %v %s", ok, redsyncErr(err))
	log.addf("gone: %v", admin.Exists(ctx, "lock:orders").Val() == 0)
	err = rs.NewMutex("orders", opts...).Lock()
	log.addf("Lock of another prefix: NOPERM %v", err != nil && strings.Contains(err.Error(), "NOPERM"))
	return log
}

// redislockLockUser obtains, refreshes and releases with redislock as its
// lock user.
func redislockLockUser(t testing.TB, user, admin *redis.Client) clientLog {
	ctx := context.Background()
	var log clientLog
	locker := redislock.New(user)
	lock, err := locker.Obtain(ctx, "lock:orders", 5*time.Second, &redislock.Options{Metadata: "m"})
	log.addf("Obtain: %s", redislockErr(err))
	if err != nil {
		t.Fatalf("redislock as its lock user: Obtain: %v", err)
	}
	_, err = locker.Obtain(ctx, "lock:orders", 5*time.Second, nil)
	log.addf("Obtain of a held lock: %s", redislockErr(err))
	again, err := locker.Obtain(ctx, "lock:orders", 6*time.Second, &redislock.Options{Token: lock.Token()})
	log.addf("Obtain with the holder's token: %s", redislockErr(err))
	if err == nil {
		lock = again
	}
	log.addf("Refresh: %s", redislockErr(lock.Refresh(ctx, 7*time.Second, nil)))
	ttl, err := lock.TTL(ctx)
	log.addf("TTL: %v %s", ttl > 6*time.Second, redislockErr(err))
	log.addf("Release: %s", redislockErr(lock.Release(ctx)))
	log.addf("gone: %v", admin.Exists(ctx, "lock:orders").Val() == 0)
	_, err = locker.Obtain(ctx, "orders", time.Second, nil)
	log.addf("Obtain of another prefix: NOPERM %v", isNoPerm(errors.Unwrap(err)) || isNoPerm(err))
	return log
}

// TestACLLockUserRedisPy runs redis-py's Lock, connected with username=, as
// its lock user against redis-server and lockserver.
func TestACLLockUserRedisPy(t *testing.T) {
	python := debianPython(t)
	const program = `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), username="redis-py", password=sys.argv[3])
lock = r.lock("lock:orders", timeout=5)
print("acquire:", lock.acquire(blocking=False))
print("locked:", lock.locked(), "owned:", lock.owned())
print("rival acquire:", r.lock("lock:orders", timeout=5).acquire(blocking=False))
print("extend:", lock.extend(10))
print("reacquire:", lock.reacquire())
print("release:", lock.release())
print("locked after release:", lock.locked())
for name, call in [("get other", lambda: r.get("orders")), ("lock other", lambda: r.lock("orders").acquire(blocking=False)),
                   ("flushall", r.flushall), ("keys", lambda: r.keys("*"))]:
    try:
        print(name, call())
    except redis.exceptions.NoPermissionError as e:
        print(name, "NoPermissionError:", e)
`
	want := `acquire: True
locked: True owned: True
rival acquire: False
extend: True
reacquire: True
release: None
locked after release: False
get other NoPermissionError: this user has no permissions to access one of the keys used as arguments
lock other NoPermissionError: this user has no permissions to access one of the keys used as arguments
flushall NoPermissionError: this user has no permissions to run the 'flushall' command
keys NoPermissionError: this user has no permissions to run the 'keys' command
`
	for _, tg := range lockUserTargets(t, "redis-py") {
		host, port, _ := strings.Cut(tg.addr, ":")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, python, "-c", program, host, port, lockUserPass).CombinedOutput()
		cancel()
		if err != nil || string(out) != want {
			t.Errorf("%s: redis-py as its lock user (%v):\n%s\nwant:\n%s", tg.name, err, out, want)
		}
	}
}

// TestACLRedisCliUser runs redis-cli --user against redis-server and
// lockserver: the same session prints the same.
func TestACLRedisCliUser(t *testing.T) {
	var outs []string
	for _, tg := range lockUserTargets(t, "redsync") {
		tg.password = lockUserPass
		outs = append(outs, redisCli(t, tg, "SET lock:cli v NX PX 10000\nGET lock:cli\nGET other\nACL WHOAMI\nKEYS *\n", "--user", "redsync"))
		tg.password = "wrong"
		outs = append(outs, redisCli(t, tg, "GET lock:cli\n", "--user", "redsync"))
	}
	if outs[0] != outs[2] || outs[1] != outs[3] {
		t.Errorf("redis-cli --user:\n redis-server:\n%s\n%s\n lockserver:\n%s\n%s", outs[0], outs[1], outs[2], outs[3])
	}
	if !strings.Contains(outs[2], "NOPERM") || !strings.Contains(outs[3], "WRONGPASS") {
		t.Errorf("redis-cli --user: no NOPERM or WRONGPASS:\n%s\n%s", outs[2], outs[3])
	}
}

// userPair is a pair of connections, to a redis-server and a lockserver that
// both have the lock user of client, authenticated as that user; its
// connect opens more such.
func userPair(t testing.TB, client string) *pair {
	p := newPair(t)
	setLockUser(t, p.redis, client)
	setLockUser(t, p.ls, client)
	p.auth = []string{"AUTH", client, lockUserPass}
	return p.connect(t)
}

// TestACLLockUserRedisson runs Redisson's RLock, as the Redisson stand-in
// sends it (redisson_driver_test.go), authenticated as Redisson's lock user
// on redis-server and lockserver: acquire, re-entry, contention, the
// watchdog's renewal, unlock with its latch and message, forceUnlock; and
// what else such a user tries is refused alike.
func TestACLLockUserRedisson(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) {
			r := newRedisson(t, userPair(t, "redisson"), proto)
			name := "lock:orders"
			ch := redisson.PrefixName("redisson_lock__channel", name)
			sub := r.subscribe("SUBSCRIBE", ch)
			t1, t2 := r.lockName(1), r.lockName(2)
			r.rlockTryLock(name, t1).is(nilReply)
			r.rlockTryLock(name, t1).is(nilReply) // re-entry
			r.rlockTryLock(name, t2).within(redissonLease-1000, redissonLease)
			r.eval(redisson.LockTaskRenew, []string{name}, redissonLease, t1).is("*1\r\n:1\r\n")
			r.rlockUnlock(name, t1, generateID()).is(intReply(0)) // held once more
			request := generateID()
			r.rlockUnlock(name, t1, request).is(intReply(1))
			sub.message("message", ch, "0")
			r.do("DEL", redisson.UnlockLatch(name, request)).is(intReply(1))
			r.rlockTryLock(name, t2).is(nilReply)
			r.eval(redisson.RLockForceUnlock, []string{name, ch}, 0, r.publish).is(intReply(1))
			sub.message("message", ch, "0")
			r.do("PING").is("+PONG\r\n")
			for _, args := range [][]any{{"GET", "orders"}, {"HGET", "orders", "f"}, {"KEYS", "*"}, {"CONFIG", "GET", "maxmemory"},
				{"SUBSCRIBE", "news"}, {"PUBLISH", "news", "m"}, {"FLUSHALL"}} {
				x := r.do(args...)
				if x.redis != x.ls || !strings.HasPrefix(x.ls, "-NOPERM") {
					t.Errorf("%v as Redisson's lock user:\n redis-server: %q\n   lockserver: %q", args, x.redis, x.ls)
				}
			}
			// A script touching another key is refused inside.
			x := r.eval("return redis.call('get', 'orders')", nil)
			if x.redis != x.ls || !strings.Contains(x.ls, "The user executing the script can't access at least one of the keys") {
				t.Errorf("a script as Redisson's lock user:\n redis-server: %q\n   lockserver: %q", x.redis, x.ls)
			}
		})
	}
}

// TestACLInfoCounts counts refusals as Redis 7.2's INFO stats does
// (acl_access_denied_*; Redis 7.0 has no such fields): a worked example of
// each kind, which ACL LOG RESET leaves and CONFIG RESETSTAT zeroes.
func TestACLInfoCounts(t *testing.T) {
	s := startLockserver(t, lockserver.Options{})
	admin := dialRaw(t, s.Addr())
	setLockUser(t, admin, "redsync")
	c := dialRaw(t, s.Addr())
	for _, args := range [][]string{
		{"AUTH", "redsync", "wrong"}, {"AUTH", "nosuch", "x"}, {"AUTH", "redsync", lockUserPass},
		{"KEYS", "*"}, {"FLUSHALL"}, {"CLIENT", "LIST"}, {"GET", "other"}, {"GET", "other2"}, {"GET", "lock:x"},
	} {
		c.Do(args...)
	}
	// A channel: PUBLISH is not among redsync's commands, so a user of its
	// own.
	admin.Do("ACL", "SETUSER", "pub", "on", "nopass", "+publish", "resetchannels", "&ok")
	c.Do("AUTH", "pub", "x")
	c.Do("PUBLISH", "other", "m")
	counts := func() string {
		var got []string
		for _, line := range strings.Split(admin.Do("INFO", "stats"), "\r\n") {
			if strings.HasPrefix(line, "acl_access_denied_") {
				got = append(got, line)
			}
		}
		return strings.Join(got, " ")
	}
	want := "acl_access_denied_auth:2 acl_access_denied_cmd:3 acl_access_denied_key:2 acl_access_denied_channel:1"
	if got := counts(); got != want {
		t.Errorf("INFO stats: %s\nwant %s", got, want)
	}
	admin.Do("ACL", "LOG", "RESET")
	if got := counts(); got != want {
		t.Errorf("after ACL LOG RESET: %s\nwant %s", got, want)
	}
	admin.Do("CONFIG", "RESETSTAT")
	if got, zero := counts(), "acl_access_denied_auth:0 acl_access_denied_cmd:0 acl_access_denied_key:0 acl_access_denied_channel:0"; got != zero {
		t.Errorf("after CONFIG RESETSTAT: %s", got)
	}
}

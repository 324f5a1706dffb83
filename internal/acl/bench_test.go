package acl

import (
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// The cost of checking a Redisson lock script's EVALSHA (one key): the
// default user, allowed everything, and Redisson's lock user of
// docs/compatibility.md (key patterns, channel patterns, single commands).
func BenchmarkCheck(b *testing.B) {
	args := ops("EVALSHA", "0123456789012345678901234567890123456789", "1", "lock:orders", "30000", "id:1")
	cmd := keyspace.Lookup(args[0])
	redisson, err := SetUser(nil, "redisson", ops("on", "~lock:*", "~redisson_unlock_latch:{lock:*", "~redisson_lock__channel:{lock:*",
		"&redisson_lock__channel:{lock:*", "-@all", "+evalsha", "+script|load", "+exists", "+hincrby", "+hexists", "+pexpire",
		"+pttl", "+del", "+get", "+set", "+publish", "+subscribe", "+unsubscribe", "+ping"))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		u    *User
	}{{"default", NewDefault()}, {"redisson", redisson}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.u.Check(cmd, args).Reason != Allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}

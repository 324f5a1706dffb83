// Package redisson holds what lockserver shares with Redisson's Java client:
// the Lua scripts it sends (scripts.go) and how it names a lock's keys and
// channels. The Go lock package speaks them to interoperate with Redisson,
// and the compat tests run them on redis-server and lockserver; one copy
// serves both, so the two cannot drift apart.
package redisson

import "strings"

// Key names follow Redisson's RedissonObject, so that a client locking the
// same name uses the same keys and channels. Every key of a lock is in the
// hash slot of its name.

// PrefixName is RedissonObject.prefixName: the prefix joined to the name in
// the name's hash slot.
func PrefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// SuffixName is RedissonObject.suffixName.
func SuffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// UnlockLatch is RedissonBaseLock.getUnlockLatchName for one unlock request:
// the key whose value a retried unlock returns again.
func UnlockLatch(name, requestID string) string {
	return PrefixName("redisson_unlock_latch", name) + ":" + requestID
}

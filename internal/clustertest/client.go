package clustertest

import (
	"strings"
	"testing"
	"time"
)

// Eventually runs op until it succeeds, as a client does across an
// election, and fails the test with what and op's last error after Wait.
func Eventually(t testing.TB, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		err := op()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(poll)
	}
}

// WriteErr reports whether err is a reply that a leader change explains:
// TRYAGAIN and CLUSTERDOWN (nothing was written; go-redis retries them a few
// times itself) and UNKNOWN (read back to learn what happened).
func WriteErr(err error) bool {
	for _, code := range []string{"TRYAGAIN ", "CLUSTERDOWN ", "UNKNOWN "} {
		if err != nil && strings.HasPrefix(err.Error(), code) {
			return true
		}
	}
	return false
}

package server

import (
	"strconv"
	"strings"
	"testing"
)

// MEMORY PURGE makes used_memory (INFO's, and maxmemory's) the live heap of
// now rather than of the last collection: 10k values of 1 kB count once
// written, and stop counting once deleted, with no collection in between
// that the test did not ask for.
func TestMemoryPurgeMakesUsedMemoryCurrent(t *testing.T) {
	s, addr := newTestServer(t, Config{})
	c := dial(t, addr)
	purge := func() int64 {
		t.Helper()
		if got := c.do(t, "MEMORY PURGE"); got != "+OK\r\n" {
			t.Fatalf("MEMORY PURGE: %q", got)
		}
		return s.mem.current()
	}
	base := purge()
	value := strings.Repeat("v", 1000)
	for i := range 10000 {
		if got := c.do(t, "SET key:"+strconv.Itoa(i)+" "+value); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	if held := purge() - base; held < 10000*1000 {
		t.Errorf("used_memory grew by %d bytes with 10 MB of values held", held)
	}
	if got := c.do(t, "FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL: %q", got)
	}
	if left := purge() - base; left > 1<<20 {
		t.Errorf("used_memory is %d bytes above where it started after FLUSHALL", left)
	}
}

package server

import (
	"io"
	"strconv"
	"strings"
	"testing"
)

// LATENCY DOCTOR's figures, on a worked example: samples of 10, 20 and 30
// ms at seconds 100, 101 and 105, read at 110. Their average is 20 ms, their
// mean absolute deviation (10+0+10)/3 = 6 ms (Redis divides in integers),
// and the oldest is 10 s old: 3.33 s between samples.
func TestLatencyDoctorFigures(t *testing.T) {
	var m latencyMonitor
	m.add("command", 100, 10)
	m.add("command", 101, 20)
	m.add("command", 105, 30)
	m.add("fast-command", 109, 2)
	got := m.report(110, 5, 10_000)
	for _, want := range []string{
		"Dave, I have observed latency spikes in this Redis instance.",
		"\n1. command: 3 latency spikes (average 20ms, mean deviation 6ms, period 3.33 sec). Worst all time event 30ms.\n",
		"\n2. fast-command: 1 latency spikes (average 2ms, mean deviation 0ms, period 1.00 sec). Worst all time event 2ms.\n",
		// The slow log's 10 ms is above the monitor's 5 ms.
		"'CONFIG SET slowlog-log-slower-than 5000'",
		"--procs",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if got := m.report(110, 5, 1000); strings.Contains(got, "slowlog-log-slower-than") {
		t.Errorf("with the slow log below the monitor's threshold, the report still asks to lower it:\n%s", got)
	}
}

// MEMORY DOCTOR finds the peak of a heap that held twice what it holds now,
// and has nothing to say of one that holds what it held; an empty server
// gets Redis's reply for one (TestDiffMemory).
func TestMemoryDoctorSeesAPeak(t *testing.T) {
	_, addr := newTestServer(t, Config{})
	c := dial(t, addr)
	value := strings.Repeat("v", 1000)
	const keys = 20000
	for i := range keys {
		if got := c.do(t, "SET key:"+strconv.Itoa(i)+" "+value); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	c.do(t, "MEMORY PURGE")
	if got := c.bulk(t, "MEMORY DOCTOR"); !strings.Contains(got, "can't find any memory issue") {
		t.Errorf("MEMORY DOCTOR at the peak: %q", got)
	}
	for i := range keys * 2 / 3 {
		c.do(t, "DEL key:"+strconv.Itoa(i))
	}
	c.do(t, "MEMORY PURGE")
	if got := c.bulk(t, "MEMORY DOCTOR"); !strings.Contains(got, " * Peak memory:") {
		t.Errorf("MEMORY DOCTOR with a third of the peak held: %q", got)
	}
}

// bulk sends an inline command and returns its bulk string reply.
func (c *client) bulk(t testing.TB, line string) string {
	t.Helper()
	head := c.do(t, line)
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil {
		t.Fatalf("%s: %q, want a bulk string", line, head)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(c.rd, body); err != nil {
		t.Fatal(err)
	}
	return string(body[:n])
}

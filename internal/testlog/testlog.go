// Package testlog is a log that tests read while a server writes to it.
package testlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// A Buffer collects what a logger writes; its methods are safe to call
// while the logger writes. The zero value is an empty Buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns all that was written.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Events returns the JSON lines whose "event" is event, each decoded.
func (l *Buffer) Events(event string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}

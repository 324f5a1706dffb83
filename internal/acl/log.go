package acl

import (
	"sync"
	"time"
)

// Log is the ACL LOG of one node: the commands refused and the failed
// authentications, newest first, a repeat of a recent entry counted in it
// rather than added, as Redis's addACLLogEntry does.
type Log struct {
	mu      sync.Mutex
	entries []*LogEntry // newest first
	max     int
}

// LogEntry is one entry of the ACL log.
type LogEntry struct {
	Count    int64
	Reason   Reason
	Context  string // toplevel, multi or lua
	Object   string // the command, key or channel refused, or AUTH
	Username string
	// Time is when it last happened; ClientInfo describes the client it
	// last happened to, as CLIENT LIST does.
	Time       time.Time
	ClientInfo string
}

// Contexts of log entries.
const (
	ContextTopLevel = "toplevel"
	ContextMulti    = "multi"
	ContextLua      = "lua"
)

// DefaultLogMax is Redis's default acllog-max-len.
const DefaultLogMax = 128

// groupWithin is how close in time an entry must be to a past one like it
// to be counted in it.
const groupWithin = 60 * time.Second

// NewLog returns an empty log that keeps max entries.
func NewLog(max int) *Log { return &Log{max: max} }

// SetMax changes how many entries the log keeps (acllog-max-len).
func (l *Log) SetMax(max int) {
	l.mu.Lock()
	l.max = max
	l.trim()
	l.mu.Unlock()
}

// Max returns how many entries the log keeps.
func (l *Log) Max() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

func (l *Log) trim() {
	if len(l.entries) > l.max {
		clear(l.entries[l.max:])
		l.entries = l.entries[:l.max]
	}
}

// Add records e (whose Count is ignored): in a like entry among the ten
// newest, from the last minute, which moves to the front, or as a new one.
func (l *Log) Add(e LogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, past := range l.entries[:min(10, len(l.entries))] {
		d := past.Time.Sub(e.Time)
		if past.Reason == e.Reason && past.Context == e.Context && past.Object == e.Object &&
			past.Username == e.Username && d <= groupWithin && d >= -groupWithin {
			past.Count++
			past.Time, past.ClientInfo = e.Time, e.ClientInfo
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = past
			return
		}
	}
	e.Count = 1
	l.entries = append([]*LogEntry{&e}, l.entries...)
	l.trim()
}

// Entries returns copies of the n newest entries.
func (l *Log) Entries(n int) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.entries))
	out := make([]LogEntry, n)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

// Reset empties the log.
func (l *Log) Reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

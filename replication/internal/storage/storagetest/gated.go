// Package storagetest holds what the tests of the storage and of the engine
// above it share: a log store whose writes a test can stall or fail.
package storagetest

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// GatedStore is a log store with a gate: while held, writes wait; a dropped
// write is lost, as one a crash cuts short.
type GatedStore struct {
	raft.LogStore
	mu      sync.Mutex
	held    chan struct{} // closed to let writes through; nil when open
	dropped bool
	waiting atomic.Int32 // writes waiting at the gate
}

// Hold stops writes at the gate.
func (g *GatedStore) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(chan struct{})
}

// Release lets the writes through; with drop, they fail unwritten, and so
// do all later ones.
func (g *GatedStore) Release(drop bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropped = drop
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// Waiting returns how many writes wait at the gate.
func (g *GatedStore) Waiting() int { return int(g.waiting.Load()) }

func (g *GatedStore) StoreLogs(logs []*raft.Log) error {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held != nil {
		g.waiting.Add(1)
		<-held
		g.waiting.Add(-1)
	}
	g.mu.Lock()
	dropped := g.dropped
	g.mu.Unlock()
	if dropped {
		return errors.New("the write was lost")
	}
	return g.LogStore.StoreLogs(logs)
}

func (g *GatedStore) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

package storage

import "time"

// Pacer paces background work (a snapshot's frames, raft.db's batches):
// after each piece, Pause sleeps twice as long as the piece took since the
// last pause, and at least backgroundPause, so that the work has at most a
// third of the node's time, and less while the rest of the node keeps it
// waiting for the processor (a piece's time counts that wait). A node on one
// processor, as on a small machine, so goes on serving its clients while it
// writes a large snapshot (bench/RESULTS.md, held-growth, compares pauses).
// The sleep also lets the scheduler poll the network and run what it
// readied: a goroutine that only yields goes back to the run queue ahead of
// the network, which a node on one processor then polls only once per time
// slice (10 ms).
type Pacer struct {
	resumed time.Time // when the piece under way began; zero before the first
}

// Pause sleeps after a piece of work (see Pacer).
func (p *Pacer) Pause() {
	took := time.Duration(0)
	if !p.resumed.IsZero() {
		took = time.Since(p.resumed)
	}
	time.Sleep(max(backgroundPause, 2*took))
	p.resumed = time.Now()
}

// backgroundPause is the shortest of Pacer's pauses.
const backgroundPause = 100 * time.Microsecond

package replication

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/lockserver/lockserver/keyspace"
)

// smSnapshot is the state machine as freeze found it: what a snapshot holds.
type smSnapshot struct {
	scripts []string
	keys    *keyspace.Frozen
}

// freeze takes the state for a snapshot, cheaply (see keyspace.Frozen); the
// caller keeps Apply out meanwhile.
func (sm *StateMachine) freeze() smSnapshot {
	return smSnapshot{scripts: sm.lua.Scripts(), keys: sm.store.Freeze()}
}

// write writes the script cache, then the keyspace, last, since its reader
// reads ahead.
func (s smSnapshot) write(w io.Writer) error {
	b := binary.AppendUvarint(nil, uint64(len(s.scripts)))
	for _, body := range s.scripts {
		b = appendString(b, body)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("scripts: %w", err)
	}
	if err := s.keys.WriteSnapshot(w); err != nil {
		return fmt.Errorf("keyspace: %w", err)
	}
	return nil
}

// maxSnapshotScript bounds a script body read from a snapshot.
const maxSnapshotScript = 1 << 30

// readSnapshot reads what smSnapshot.write wrote into sm, which is empty.
func (sm *StateMachine) readSnapshot(br *bufio.Reader) error {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("script count: %w", err)
	}
	var scripts []string
	for range n {
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("script length: %w", err)
		}
		if size > maxSnapshotScript {
			return fmt.Errorf("script of %d bytes", size)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("script: %w", err)
		}
		scripts = append(scripts, string(body))
	}
	// A body that no longer compiles stays cached, as on the leader; the error
	// is the script's to report when it runs.
	sm.lua.LoadScripts(scripts)
	if err := sm.store.ReadSnapshot(br); err != nil {
		return fmt.Errorf("keyspace: %w", err)
	}
	return nil
}

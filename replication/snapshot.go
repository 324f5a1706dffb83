package replication

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// writeSnapshot writes the state machine: the script cache, then the
// keyspace, last, since its reader reads ahead.
func (sm *StateMachine) writeSnapshot(w *bytes.Buffer) error {
	scripts := sm.lua.Scripts()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(scripts)))
	w.Write(b)
	for _, body := range scripts {
		w.Write(appendString(nil, body))
	}
	if err := sm.store.WriteSnapshot(w); err != nil {
		return fmt.Errorf("keyspace: %w", err)
	}
	return nil
}

// maxSnapshotScript bounds a script body read from a snapshot.
const maxSnapshotScript = 1 << 30

// readSnapshot reads what writeSnapshot wrote into sm, which is empty.
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

package replication

import (
	"bufio"
	"bytes"
	"fmt"
)

// writeSnapshot writes the state machine: the keyspace, last, since its
// reader buffers ahead.
func (sm *StateMachine) writeSnapshot(w *bytes.Buffer) error {
	if err := sm.store.WriteSnapshot(w); err != nil {
		return fmt.Errorf("keyspace: %w", err)
	}
	return nil
}

// readSnapshot reads what writeSnapshot wrote into sm, which is empty.
func (sm *StateMachine) readSnapshot(br *bufio.Reader) error {
	if err := sm.store.ReadSnapshot(br); err != nil {
		return fmt.Errorf("keyspace: %w", err)
	}
	return nil
}

package replication

import (
	"bufio"
	"bytes"
	"errors"
)

// errNoStateSnapshot refuses snapshots until the keyspace and the script cache
// can be serialised: a snapshot without them would let raft compact away the
// log that holds them.
var errNoStateSnapshot = errors.New("the state machine cannot be serialised yet")

// writeSnapshot writes the script cache and the keyspace.
func (sm *StateMachine) writeSnapshot(w *bytes.Buffer) error { return errNoStateSnapshot }

// readSnapshot reads what writeSnapshot wrote into sm, which is empty.
func (sm *StateMachine) readSnapshot(br *bufio.Reader) error { return errNoStateSnapshot }

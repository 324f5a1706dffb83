package replication

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/wire"
	"github.com/lockserver/lockserver/keyspace"
)

// smSnapshot is the state machine as freeze found it: what a snapshot holds.
type smSnapshot struct {
	sm      *stateMachine
	scripts []string
	users   []byte // the ACL users, encoded (acl.EncodeUsers)
	keys    *keyspace.Frozen
}

// freeze takes the state for a snapshot in constant time (see
// keyspace.Frozen); the caller keeps apply out meanwhile, and calls release,
// the same way, once the snapshot is written.
func (sm *stateMachine) freeze() smSnapshot {
	return smSnapshot{sm: sm, scripts: sm.lua.Scripts(), users: sm.users.Encode(), keys: sm.store.Freeze()}
}

// release lets the state machine change what s holds in place again.
func (s smSnapshot) release() { s.sm.store.Release(s.keys) }

// write writes the keyspace with, in its checked meta bytes, the engine's
// header, the script cache and the ACL users.
func (s smSnapshot) write(w io.Writer, header []byte) error {
	meta := wire.AppendBytes(nil, header)
	meta = binary.AppendUvarint(meta, uint64(len(s.scripts)))
	for _, body := range s.scripts {
		meta = wire.AppendString(meta, body)
	}
	meta = wire.AppendBytes(meta, s.users)
	return s.keys.WriteSnapshot(w, meta)
}

// readSnapshot reads what smSnapshot.write wrote into sm, which is empty,
// and returns the engine's header. Nothing is read from r after the
// snapshot's end.
func (sm *stateMachine) readSnapshot(r io.Reader) ([]byte, error) {
	meta, err := sm.store.ReadSnapshot(r)
	if err != nil {
		return nil, err
	}
	d := wire.NewDecoder(meta)
	header := d.Bytes()
	n := d.Count(1)
	scripts := make([]string, 0, n)
	for range n {
		scripts = append(scripts, string(d.Bytes()))
	}
	// A snapshot from before ACL users were replicated holds none.
	var users []byte
	if d.Len() > 0 {
		users = d.Bytes()
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("snapshot meta: %w", err)
	}
	if users != nil {
		restored, seeded, err := acl.Decode(users)
		if err != nil {
			return nil, fmt.Errorf("snapshot meta: %w", err)
		}
		// Users never seeded are the configuration of the member that took
		// the snapshot: this member keeps its own until the seed.
		if seeded {
			sm.restoredUsers = restored
		}
	}
	// A body that no longer compiles stays cached, as on the leader; the error
	// is the script's to report when it runs.
	sm.lua.LoadScripts(scripts)
	return header, nil
}

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
	sm        *stateMachine
	scripts   []string
	users     []byte   // the ACL users, encoded (acl.EncodeUsers)
	libraries []string // the function libraries' code
	keys      *keyspace.Frozen
}

// freeze takes the state for a snapshot in constant time (see
// keyspace.Frozen); the caller keeps apply out meanwhile, and calls release,
// the same way, once the snapshot is written.
func (sm *stateMachine) freeze() smSnapshot {
	return smSnapshot{sm: sm, scripts: sm.lua.Scripts(), users: sm.users.Encode(), libraries: sm.lua.Libraries(), keys: sm.store.Freeze()}
}

// release lets the state machine change what s holds in place again.
func (s smSnapshot) release() { s.sm.store.Release(s.keys) }

// write writes the keyspace with, in its checked meta bytes, the engine's
// header, the script cache, the ACL users and, when there are any, the
// function libraries (which only a cluster whose version is lockserver 0.2
// or later can have: a member of 0.1, which reads no libraries, cannot be
// one of its members).
func (s smSnapshot) write(w io.Writer, header []byte) error {
	meta := wire.AppendBytes(nil, header)
	meta = appendStrings(meta, s.scripts)
	meta = wire.AppendBytes(meta, s.users)
	if len(s.libraries) > 0 {
		meta = appendStrings(meta, s.libraries)
	}
	return s.keys.WriteSnapshot(w, meta)
}

// appendStrings appends a count, then each string.
func appendStrings(b []byte, items []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(items)))
	for _, s := range items {
		b = wire.AppendString(b, s)
	}
	return b
}

// readStrings reads what appendStrings wrote.
func readStrings(d *wire.Decoder) []string {
	n := d.Count(1)
	items := make([]string, 0, n)
	for range n {
		items = append(items, string(d.Bytes()))
	}
	return items
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
	scripts := readStrings(&d)
	// A snapshot from before ACL users were replicated holds none, and one
	// with no function libraries none of those.
	var users []byte
	var libraries []string
	if d.Len() > 0 {
		users = d.Bytes()
	}
	if d.Len() > 0 {
		libraries = readStrings(&d)
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
	if err := sm.lua.LoadLibraries(libraries); err != nil {
		return nil, fmt.Errorf("snapshot meta: function library: %w", err)
	}
	return header, nil
}

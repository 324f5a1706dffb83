// Package luaexec runs Redis Lua scripts (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO,
// SCRIPT) and Redis 7's functions (FUNCTION, FCALL, FCALL_RO; see
// functions.go) on gopher-lua against a keyspace.Store: an Engine executes
// the commands of applied log entries, scripts in Lua and every other
// command in the keyspace.
//
// Its contract with the state machine that drives it: Prepare checks a
// command before it is proposed, so that the errors a leader can see
// (numkeys, NOSCRIPT, a body too large, a compile error) never enter the
// log, and tells whether it must go through the log; ExecAs runs a
// command of an applied entry, with the same reply and the same keyspace
// on every node; the bodies in the script cache and the function
// libraries are replicated state, which Scripts, LoadScripts, Libraries and
// LoadLibraries carry through a snapshot, while the scripts' compiled forms
// are a bounded cache any node may rebuild; Record and
// Calls report the commands scripts called, for the node that counts them.
//
// Scripts run inside the replicated state machine, so everything here is
// deterministic: the time a script sees is its entry's, math.random starts
// from the same state for every script, unordered replies are sorted, and a
// runaway script is stopped by a budget counted in operations and bytes,
// never by a wall clock.
//
// Scripts behave as on Redis 7.0: the same conversions between replies and
// Lua values (convert.go), the same error texts, the same sandbox (globals
// and libraries read-only, no io, os, debug, require, dofile, print), the
// same libraries (base, string, table, math, coroutine, cjson, bit, struct,
// cmsgpack, redis) and Lua 5.1's semantics where gopher-lua's differ (see
// internal/lua51, arith.go, internal/lualib, internal/clib).
//
// A script that fails half-way keeps the effects of the commands it ran
// before the error, as in Redis: scripts are atomic with respect to other
// clients, not transactional.
//
// Inside, internal/lua51 parses scripts into gopher-lua's AST, instrumented
// to charge the budget whose unit and interface internal/budget defines;
// internal/lualib holds the libraries that need of the engine only that
// budget and its read-only tables. The engine keeps the sandbox, the base,
// coroutine and redis libraries, the conversions and the script cache.
package luaexec

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec/internal/lua51"
	lua "github.com/yuin/gopher-lua"
)

// defaultBudget bounds one script to a few seconds of one core at worst,
// below Redis's lua-time-limit (5 s, after which Redis answers BUSY): 12
// million operations, or 192 MB of strings built, copied, hashed or
// scanned. It lets the scripts of Redis's own test suite finish (the
// largest, a million SADDs, takes 10 million). BenchmarkWorstInputs
// measures the scripts that take longest for their steps.
const defaultBudget = 12_000_000

// Defaults of the options only tests set.
const (
	// defaultMaxScriptSize bounds a script body (Redis allows up to
	// proto-max-bulk-len, 512 MB; a body this large is already absurd).
	defaultMaxScriptSize = 64 << 20
	// defaultCompiledScripts is how many compiled scripts are kept.
	defaultCompiledScripts = 1000
)

// Options tune an Engine. The zero value is usable.
type Options struct {
	// Budget is how many steps one script may take before it is stopped with
	// an error. Every function call and loop iteration costs the operations
	// of the body it runs (lua51's weight.go); building, copying, hashing,
	// comparing or scanning 16 bytes costs a step, whether a library
	// function, a table key, a comparison, an error message or the script's
	// reply does it; so do 16 values expanded from '...', four steps of the
	// pattern matcher, a command's arguments and each value of its reply,
	// and compiling (a token, or 16 bytes of source). Every node counts
	// alike, so a script stops at the same point everywhere. It also bounds
	// what compiling a script body may cost. 0 means the default
	// (SetDefaultBudget).
	Budget int64
	// Monitor, when set, is asked as each script starts for a function to
	// tell of every command the script calls, once it has run (Redis's
	// MONITOR shows them); it returns nil while no one watches.
	Monitor func() func(db int, args [][]byte)
	// Known, when set, says whether a command exists at this moment, for
	// clients and scripts alike: a cluster whose members do not all run the
	// release that added a command treats it as unknown (see replication's
	// commandsAdded). Nil: every command of the table exists.
	Known func(cmd *keyspace.Command) bool

	// maxScriptSize is the largest script body accepted, in bytes. 0 means
	// defaultMaxScriptSize.
	maxScriptSize int
	// compiledScripts bounds the cache of compiled scripts (the bodies
	// themselves are all kept, as Redis does). 0 means
	// defaultCompiledScripts.
	compiledScripts int
	// logger receives redis.log messages; nil discards them.
	logger *slog.Logger
}

// known reports whether cmd exists at this moment (Options.Known).
func (e *Engine) known(cmd *keyspace.Command) bool { return e.opts.Known == nil || e.opts.Known(cmd) }

// Engine executes the commands of log entries: script commands in Lua, all
// others in the keyspace. ExecAs, Scripts, LoadScripts, Stopped, Record and
// Calls must not run concurrently; Prepare may run beside them.
type Engine struct {
	store *keyspace.Store
	opts  Options
	cache *scriptCache
	// defaultBudget is the budget when Options.Budget is 0 (see
	// SetDefaultBudget); 0 means the package's defaultBudget.
	defaultBudget atomic.Int64
	// libs are the function libraries (functions.go), replaced whole on
	// every change.
	libs  atomic.Pointer[libraries]
	vm    *vm    // the Lua state, built for the first script
	epoch uint64 // see SetEpoch
	// stopped counts the scripts the budget stopped.
	stopped int64
	// user is the ACL user whose scripts run now (see ExecAs); nil allows
	// them every command. denials are the commands its scripts were refused.
	user    *acl.User
	denials []acl.Denial
	// recording says whether the commands scripts call are kept in calls
	// (see Record).
	recording bool
	calls     []ScriptCall
}

// New returns an engine over store.
func New(store *keyspace.Store, opts Options) *Engine {
	if opts.maxScriptSize <= 0 {
		opts.maxScriptSize = defaultMaxScriptSize
	}
	if opts.compiledScripts <= 0 {
		opts.compiledScripts = defaultCompiledScripts
	}
	e := &Engine{store: store, opts: opts}
	e.cache = newScriptCache(opts.compiledScripts, e.budget)
	e.libs.Store(newLibraries())
	return e
}

// SetEpoch sets the epoch scripts see as redis.LOCKSERVER_EPOCH (nil on
// redis-server): the number of times the cluster's state was restored from
// a backup or recovered from a minority, which package lock puts above its
// fencing tokens' counters so that a token issued after a restore exceeds
// every token issued before it. Like the keyspace, it is replicated state:
// the state machine sets it as it reads a snapshot.
func (e *Engine) SetEpoch(epoch uint64) {
	e.epoch = epoch
	if e.vm != nil {
		e.vm.redis.RawSetString("LOCKSERVER_EPOCH", lua.LNumber(epoch))
	}
}

// budget is the budget of a script that starts now (Options.Budget).
func (e *Engine) budget() int64 {
	if e.opts.Budget > 0 {
		return e.opts.Budget
	}
	if n := e.defaultBudget.Load(); n > 0 {
		return n
	}
	return defaultBudget
}

// SetDefaultBudget sets the budget of scripts when Options.Budget is 0;
// 0 restores this release's default. Like the keyspace, the budget must be
// the same on every node: a cluster whose members do not all run this
// release keeps its older default (the state machine sets it from the
// cluster version).
func (e *Engine) SetDefaultBudget(n int64) { e.defaultBudget.Store(n) }

// Stopped returns how many scripts the budget has stopped.
func (e *Engine) Stopped() int64 { return e.stopped }

func (e *Engine) machine() *vm {
	if e.vm == nil {
		e.vm = newVM(e)
	}
	return e.vm
}

// ExecAs runs one command of an applied entry at c.Now against c.DB, for a
// client authenticated as u: the commands its script calls are checked
// against u's permissions, as Redis checks them, and redis.acl_check_cmd
// answers for u. A nil u is allowed everything.
func (e *Engine) ExecAs(c *keyspace.Call, u *acl.User) keyspace.Reply {
	e.user = u
	defer func() { e.user = nil }()
	return e.exec(c, true)
}

// Denials returns the commands scripts were refused since the last call,
// and forgets them.
func (e *Engine) Denials() []acl.Denial {
	d := e.denials
	e.denials = nil
	return d
}

// exec runs one command: of an applied entry when apply is set, else a
// command that Prepare classified as a read, which changes no replicated
// state (an EVAL of a body not in the script cache runs without adding it).
func (e *Engine) exec(c *keyspace.Call, apply bool) keyspace.Reply {
	cmd := keyspace.Lookup(c.Args[0])
	if cmd != nil && !e.known(cmd) {
		return keyspace.ErrUnknownCommand(c.Args)
	}
	if cmd == nil || cmd.Layer != keyspace.ScriptingLayer {
		return e.store.Exec(c)
	}
	if !cmd.CheckArity(len(c.Args)) {
		return keyspace.ErrWrongArity(cmd.Name)
	}
	p, errReply := e.plan(cmd, c.Args)
	if errReply != nil {
		return *errReply
	}
	switch p.kind {
	case planEval:
		if apply && !p.cached {
			e.cache.add(p.script.sha, p.body)
		}
		return e.run(c, &p)
	case planLoad:
		if apply {
			e.cache.add(p.script.sha, p.body)
		}
		return keyspace.Bulk(p.script.sha)
	case planFlush:
		if apply {
			e.cache.flush()
		}
		return keyspace.OK
	case planExists:
		replies := make([]keyspace.Reply, len(c.Args)-2)
		for i, sha := range c.Args[2:] {
			_, _, ok := e.cache.lookup(sha)
			replies[i] = keyspace.Bool(ok)
		}
		return keyspace.Array(replies...)
	case planFcall:
		if !apply {
			// A function is found by name, and a FUNCTION LOAD applied since
			// Prepare may have made a reader a writer: as a read, it runs dry.
			dry := *c
			dry.Dry = true
			return e.run(&dry, &p)
		}
		return e.run(c, &p)
	case planFuncLoad, planFuncDelete, planFuncFlush, planFuncRestore:
		if !apply {
			return keyspace.WouldWrite // Prepare sends them to the log
		}
		switch p.kind {
		case planFuncLoad:
			return e.load(p.libs[0], p.replace)
		case planFuncDelete:
			return e.delete(p.name)
		case planFuncFlush:
			e.libs.Store(newLibraries())
			return keyspace.OK
		}
		return e.restore(p.codes, p.policy)
	}
	return p.reply
}

// Prepare checks a command before it is proposed and reports what it may do
// (keyspace.Effect). For scripts it resolves what the leader can: numkeys,
// NOSCRIPT, script size, shebang and compile errors, and the no-writes flag.
// EVAL_RO, EVALSHA_RO, no-writes scripts and SCRIPT EXISTS read, except the
// first EVAL of a body, which goes through the log so that every node caches
// it (EVALSHA must then work anywhere, as on Redis). Another cached script
// may write or not, as it finds the keyspace: run dry (keyspace.Call.Dry),
// it stops at its first write command. FCALL and FCALL_RO are the same as
// EVALSHA and EVALSHA_RO of a script with flags. SCRIPT LOAD and FLUSH,
// and FUNCTION LOAD, DELETE, FLUSH and RESTORE, change the script cache and
// the function libraries, which are replicated state. Other commands do
// what their table row says.
func (e *Engine) Prepare(cmd *keyspace.Command, args [][]byte) (keyspace.Effect, *keyspace.Reply) {
	if !e.known(cmd) {
		r := keyspace.ErrUnknownCommand(args)
		return keyspace.Reads, &r
	}
	if cmd.Layer != keyspace.ScriptingLayer {
		return cmd.Effect(args), nil
	}
	p, errReply := e.plan(cmd, args)
	if errReply != nil {
		return keyspace.Reads, errReply
	}
	switch p.kind {
	case planEval, planFcall:
		// A flagged script that may write, called as *_RO, is refused when it
		// runs; it goes through the log so that the refusal sees the entry's
		// OOM state (Redis reports OOM first).
		sb := p.shebang()
		switch {
		case !p.cached || p.ro && sb.present && sb.flags&flagNoWrites == 0:
			return keyspace.Writes, nil
		case !p.readOnly:
			return keyspace.MayWrite, nil
		}
	case planLoad, planFlush, planFuncLoad, planFuncDelete, planFuncFlush, planFuncRestore:
		return keyspace.Writes, nil
	}
	return keyspace.Reads, nil
}

// Kinds of plan.
const (
	planEval    = iota + 1 // run a script
	planLoad               // SCRIPT LOAD
	planFlush              // SCRIPT FLUSH
	planExists             // SCRIPT EXISTS
	planReplied            // a fixed reply (SCRIPT KILL, HELP, DEBUG)
)

// plan is a checked scripting command: what Prepare and exec both need.
type plan struct {
	kind     int
	body     string
	cached   bool      // the body is in the script cache (always, for a function)
	script   *compiled // for planEval and planLoad
	fn       *function // for planFcall
	keys     [][]byte
	argv     [][]byte
	readOnly bool // EVAL_RO or a no-writes script: writes are refused
	ro       bool // called as EVAL_RO, EVALSHA_RO or FCALL_RO
	reply    keyspace.Reply
	// What FUNCTION's subcommands change: FUNCTION LOAD's library and
	// REPLACE, FUNCTION DELETE's name, FUNCTION RESTORE's codes and policy.
	libs    []*library
	replace bool
	name    string
	codes   []string
	policy  int
}

// shebang returns the flags of the script or function to run: a function's
// are declared as a script's first line declares them.
func (p *plan) shebang() shebang {
	if p.fn != nil {
		return shebang{present: true, flags: p.fn.flags}
	}
	return p.script.shebang
}

// splitKeys checks the key count of EVAL, FCALL and their kin and splits
// their arguments into keys and the rest; notInt is the reply to a count
// that is not a number.
func (p *plan) splitKeys(args [][]byte, notInt keyspace.Reply) *keyspace.Reply {
	n, ok := keyspace.ParseInt(args[2])
	var r keyspace.Reply
	switch {
	case !ok:
		r = notInt
	case n > int64(len(args)-3):
		r = keyspace.Error("ERR Number of keys can't be greater than number of args")
	case n < 0:
		r = keyspace.Error("ERR Number of keys can't be negative")
	default:
		p.keys, p.argv = args[3:3+n], args[3+n:]
		return nil
	}
	return &r
}

var (
	errNoScript = keyspace.Error("NOSCRIPT No matching script. Please use EVAL.")
	errNotBusy  = keyspace.Error("NOTBUSY No scripts in execution right now.")
)

func errReply(r keyspace.Reply) (plan, *keyspace.Reply) { return plan{}, &r }

// A planner checks a scripting command of the row it is registered for, in
// Redis's order, and describes it. The script engine registers one for every
// row of the command table's scripting layer (keyspace.ScriptingLayer).
type planner func(e *Engine, cmd *keyspace.Command, args [][]byte) (plan, *keyspace.Reply)

func init() {
	for name, p := range map[string]planner{
		"eval": (*Engine).planEval, "evalsha": (*Engine).planEval,
		"eval_ro": (*Engine).planEval, "evalsha_ro": (*Engine).planEval,
		"script|load": (*Engine).planLoad, "script|exists": planFixed(planExists),
		"script|flush": (*Engine).planFlush, "script|kill": planReply(errNotBusy),
		"script|help": planReply(scriptHelp()), "script|debug": (*Engine).planDebug,
	} {
		keyspace.Register(keyspace.ScriptingLayer, name, p)
	}
}

// plan checks a scripting command, whose arity the caller has checked, and
// describes it: SCRIPT's subcommand is found and checked in the table as the
// server finds a container's.
func (e *Engine) plan(cmd *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	if cmd.Subcommands != nil {
		sub := cmd.LookupSub(args[1])
		switch {
		case sub == nil:
			return errReply(keyspace.ErrUnknownSubcommand(args))
		case !sub.CheckArity(len(args)):
			return errReply(keyspace.ErrWrongArity(sub.Name))
		}
		cmd = sub
	}
	return cmd.Executor().(planner)(e, cmd, args)
}

// planEval plans EVAL, EVALSHA and their _RO variants.
func (e *Engine) planEval(cmd *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	p := plan{kind: planEval, ro: strings.HasSuffix(cmd.Name, "_ro")}
	isSha := strings.HasPrefix(cmd.Name, "evalsha")
	if isSha && len(args[1]) != 40 {
		return errReply(errNoScript)
	}
	if r := p.splitKeys(args, keyspace.ErrNotInteger); r != nil {
		return plan{}, r
	}
	sha := args[1]
	if !isSha {
		if len(args[1]) > e.opts.maxScriptSize {
			return errReply(e.errTooLarge(len(args[1])))
		}
		var hexSum [2 * sha1.Size]byte
		sum := sha1.Sum(args[1])
		hex.Encode(hexSum[:], sum[:])
		sha = hexSum[:]
	}
	p.body, p.script, p.cached = e.cache.lookup(sha)
	if !p.cached {
		if isSha {
			return errReply(errNoScript)
		}
		p.body = string(args[1])
	}
	if p.script == nil {
		var msg string
		if p.script, msg = e.cache.get(strings.ToLower(string(sha)), p.body); p.script == nil {
			return errReply(keyspace.Error("ERR " + msg))
		}
	}
	p.readOnly = p.ro || p.script.shebang.flags&flagNoWrites != 0
	return p, nil
}

func (e *Engine) errTooLarge(n int) keyspace.Reply {
	return keyspace.Error(fmt.Sprintf("ERR script of %d bytes is larger than the limit of %d bytes", n, e.opts.maxScriptSize))
}

// scriptHelp is SCRIPT HELP's reply.
func scriptHelp() keyspace.Reply {
	return helpReply(
		"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"DEBUG (YES|SYNC|NO)",
		"    Set the debug mode for subsequent scripts executed.",
		"EXISTS <sha1> [<sha1> ...]",
		"    Return information about the existence of the scripts in the script cache.",
		"FLUSH [ASYNC|SYNC]",
		"    Flush the Lua scripts cache. Very dangerous on replicas.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the scripts cache.",
		"    * SYNC: Synchronously flush the scripts cache.",
		"KILL",
		"    Kill the currently executing Lua script.",
		"LOAD <script>",
		"    Load a script into the scripts cache without executing it.",
		"HELP",
		"    Prints this help.",
	)
}

// helpReply is the reply of a HELP subcommand: its lines as statuses.
func helpReply(lines ...string) keyspace.Reply {
	replies := make([]keyspace.Reply, len(lines))
	for i, l := range lines {
		replies[i] = keyspace.Status(l)
	}
	return keyspace.Array(replies...)
}

// planFixed plans a command that needs nothing checked beyond its arity.
func planFixed(kind int) planner {
	return func(*Engine, *keyspace.Command, [][]byte) (plan, *keyspace.Reply) { return plan{kind: kind}, nil }
}

// planReply plans a command whose reply is always reply. SCRIPT KILL's is
// NOTBUSY: scripts run to completion or to their budget inside the state
// machine, so there is never one to kill.
func planReply(reply keyspace.Reply) planner {
	return func(*Engine, *keyspace.Command, [][]byte) (plan, *keyspace.Reply) {
		return plan{kind: planReplied, reply: reply}, nil
	}
}

// planLoad plans SCRIPT LOAD.
func (e *Engine) planLoad(_ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	body := string(args[2])
	if len(body) > e.opts.maxScriptSize {
		return errReply(e.errTooLarge(len(body)))
	}
	s, msg := e.cache.get(sha1hex(body), body)
	if s == nil {
		return errReply(keyspace.Error("ERR " + msg))
	}
	return plan{kind: planLoad, body: body, script: s}, nil
}

// planFlush plans SCRIPT FLUSH [ASYNC|SYNC].
func (e *Engine) planFlush(_ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	if len(args) > 3 || len(args) == 3 && !strings.EqualFold(string(args[2]), "sync") && !strings.EqualFold(string(args[2]), "async") {
		return errReply(keyspace.Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option"))
	}
	return plan{kind: planFlush}, nil
}

// planDebug plans SCRIPT DEBUG: the Lua debugger is interactive, which a
// replicated script cannot be.
func (e *Engine) planDebug(_ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	switch strings.ToLower(string(args[2])) {
	case "no":
		return plan{kind: planReplied, reply: keyspace.OK}, nil
	case "yes", "sync":
		return errReply(keyspace.Error("ERR SCRIPT DEBUG is not supported: scripts run inside the replicated state machine"))
	}
	return errReply(keyspace.Error("ERR Use SCRIPT DEBUG YES/SYNC/NO"))
}

// run executes a checked EVAL, EVALSHA or FCALL.
func (e *Engine) run(c *keyspace.Call, p *plan) keyspace.Reply {
	sb := p.shebang()
	if sb.present {
		// Scripts that declare flags are refused before they start (Redis
		// decides this from the command's flags, before running it).
		if c.DenyOOM && sb.flags&(flagAllowOOM|flagNoWrites) == 0 {
			return keyspace.Error(errorText(errOOM))
		}
		if p.ro && sb.flags&flagNoWrites == 0 {
			return keyspace.Error("ERR Can not execute a script with write flag using *_ro command.")
		}
	}
	v := e.machine()
	if s := p.script; s != nil && s.fn == nil {
		s.fn = v.closure(s.proto, s.pool, v.globals)
		s.keys, s.argv = upvalue(s.fn, lua51.AliasPrefix+"KEYS"), upvalue(s.fn, lua51.AliasPrefix+"ARGV")
	}
	r := &v.current
	*r = run{
		call:     *c,
		dry:      c.Dry,
		readOnly: p.readOnly,
		allowOOM: sb.flags&flagAllowOOM != 0,
		resp:     2,
		steps:    e.budget(),
	}
	v.libs.Start(c.Seed)
	if e.opts.Monitor != nil {
		r.monitor = e.opts.Monitor()
	}
	var ret lua.LValue
	var serr *scriptError
	var name string // names the script in its errors
	if p.fn != nil {
		name = p.fn.name
		ret, serr = v.call(r, p.fn, p.keys, p.argv)
	} else {
		name = p.script.sha
		ret, serr = v.exec(r, p.script, p.keys, p.argv)
	}
	if r.wouldWrite {
		return keyspace.WouldWrite
	}
	if serr != nil {
		return serr.reply(name)
	}
	return v.toReply(ret, r.resp, r.steps)
}

// NumScripts returns how many scripts the script cache holds.
func (e *Engine) NumScripts() int {
	e.cache.mu.RLock()
	defer e.cache.mu.RUnlock()
	return len(e.cache.bodies)
}

// Scripts returns the bodies in the script cache, ordered by SHA1, for a
// snapshot.
func (e *Engine) Scripts() []string {
	e.cache.mu.Lock()
	defer e.cache.mu.Unlock()
	shas := make([]string, 0, len(e.cache.bodies))
	for sha := range e.cache.bodies {
		shas = append(shas, sha)
	}
	sort.Strings(shas)
	bodies := make([]string, len(shas))
	for i, sha := range shas {
		bodies[i] = e.cache.bodies[sha]
	}
	return bodies
}

// LoadScripts replaces the script cache with bodies, from a snapshot. Every
// body is kept; the first that does not compile is reported.
func (e *Engine) LoadScripts(bodies []string) error {
	e.cache.flush()
	var first error
	for _, body := range bodies {
		sha := sha1hex(body)
		e.cache.add(sha, body)
		if _, msg := e.cache.get(sha, body); msg != "" && first == nil {
			first = fmt.Errorf("load script %s: %s", sha, msg)
		}
	}
	return first
}

package luaexec

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec/internal/budget"
	"github.com/lockserver/lockserver/luaexec/internal/clib"
	"github.com/lockserver/lockserver/luaexec/internal/lualib"
	lua "github.com/yuin/gopher-lua"
)

// Redis's identity as scripts see it (redis.REDIS_VERSION and _NUM).
const (
	redisVersion    = "7.0.15"
	redisVersionNum = 0x07000f
)

// Errors of the script runtime, with Redis 7.0's texts.
const (
	errNoArgs        = "Please specify at least one argument for this redis lib call"
	errArgType       = "Lua redis lib command arguments must be strings or integers"
	errUnknownCmd    = "Unknown Redis command called from script"
	errWrongArgs     = "Wrong number of args calling Redis command from script"
	errNotAllowed    = "This Redis command is not allowed from script"
	errWriteReadonly = "Write commands are not allowed from read-only scripts."
	errOOM           = "-OOM command not allowed when used memory > 'maxmemory'."
	errNoCluster     = "This instance has cluster support disabled"
)

func (v *vm) redisLib() *lua.LTable {
	L := v.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return v.redisCall(L, true) },
		"pcall":              func(L *lua.LState) int { return v.redisCall(L, false) },
		"log":                v.redisLog,
		"setresp":            v.redisSetResp,
		"sha1hex":            v.redisSha1hex,
		"error_reply":        v.redisErrorReply,
		"status_reply":       redisStatusReply,
		"set_repl":           redisSetRepl,
		"acl_check_cmd":      v.redisACLCheckCmd,
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
	}
	for _, name := range lualib.SortedKeys(fns) {
		t.RawSetString(name, L.NewFunction(fns[name]))
	}
	consts := []struct {
		name  string
		value lua.LValue
	}{
		{"LOG_DEBUG", lua.LNumber(0)}, {"LOG_VERBOSE", lua.LNumber(1)},
		{"LOG_NOTICE", lua.LNumber(2)}, {"LOG_WARNING", lua.LNumber(3)},
		{"REPL_NONE", lua.LNumber(0)}, {"REPL_AOF", lua.LNumber(1)},
		{"REPL_SLAVE", lua.LNumber(2)}, {"REPL_REPLICA", lua.LNumber(2)},
		{"REPL_ALL", lua.LNumber(3)},
		{"REDIS_VERSION", lua.LString(redisVersion)},
		{"REDIS_VERSION_NUM", lua.LNumber(redisVersionNum)},
		{"LOCKSERVER_EPOCH", lua.LNumber(v.e.epoch)},
	}
	for _, c := range consts {
		t.RawSetString(c.name, c.value)
	}
	v.redis = t
	return t
}

// raiseTable raises an error object {err=...} built from text.
func raiseTable(L *lua.LState, text string) int {
	L.Error(errorTable(L, text), 0)
	return 0
}

// appendArg appends f as Redis formats a Lua number passed to redis.call
// ("%.17g"), so that no precision is lost: 1724000000000, 0.10000000000000001.
func appendArg(b []byte, f float64) []byte {
	return clib.AppendNumber(b, f, 17)
}

// maxKeptArgBytes bounds the argument buffer a VM keeps between calls, so
// that one huge argument does not pin its memory for good.
const maxKeptArgBytes = 64 << 10

// scriptArgs converts redis.call's arguments to a command line: strings as
// they are, numbers as Redis formats them ("%.17g"). It returns the error
// text when an argument is of another type. The command line lives in
// buffers that the next call reuses, which is safe because commands copy
// whatever they keep (the server reuses its read buffers alike).
func (v *vm) scriptArgs(L *lua.LState) ([][]byte, string) {
	n := L.GetTop()
	if n == 0 {
		return nil, errNoArgs
	}
	buf, args := v.argBytes[:0], v.args[:0]
	for i := 1; i <= n; i++ {
		start := len(buf)
		switch x := L.Get(i).(type) {
		case lua.LString:
			buf = append(buf, x...)
		case lua.LNumber:
			buf = appendArg(buf, float64(x))
		default:
			return nil, errArgType
		}
		// Should buf move as it grows, the arguments sliced so far stay
		// where they are, intact. Each one's capacity ends where it does, so
		// that no command can append into the next.
		args = append(args, buf[start:len(buf):len(buf)])
	}
	v.argBytes, v.args = buf, args
	return args, ""
}

// lookupScriptCommand finds a command as Redis's lookupCommand does for
// scripts, descending into a container command's subcommand.
func (v *vm) lookupScriptCommand(args [][]byte) *keyspace.Command {
	if cmd := v.commands.lookup(args[0]); cmd != nil {
		return cmd.Resolve(args)
	}
	return nil
}

// clusterLayoutArity holds the arities of Redis 7.0's CLUSTER subcommands
// that lockserver's command table lacks: they change a Redis Cluster's
// layout, which here follows the Raft membership. Only scripts need them, to
// answer as Redis does (below).
var clusterLayoutArity = map[string]int{
	"addslots": -3, "addslotsrange": -4, "bumpepoch": 2, "count-failure-reports": 3,
	"delslots": -3, "delslotsrange": -4, "failover": -2, "flushslots": 2, "forget": 3,
	"links": 2, "meet": -4, "replicas": 3, "replicate": 3, "reset": -2, "saveconfig": 2,
	"set-config-epoch": 3, "setslot": -4, "slaves": 3,
}

// clusterFromScript answers a CLUSTER subcommand called by a script. A
// script sees a node as INFO describes it, cluster_enabled:0 (the CLUSTER
// view is a presentation for cluster clients, and a node's view of the
// layout is not replicated state), so it gets the replies of a redis-server
// with cluster support disabled: Redis's arity check, RESET's refusal (the
// one subcommand flagged noscript), then "cluster support disabled".
func clusterFromScript(args [][]byte) keyspace.Reply {
	sub := keyspace.Lookup(args[0]).LookupSub(args[1])
	if sub == nil {
		name := strings.ToLower(string(args[1]))
		arity, ok := clusterLayoutArity[name]
		if !ok {
			return keyspace.Error(errorText(errUnknownCmd))
		}
		sub = &keyspace.Command{Name: name, Arity: arity}
	}
	switch {
	case !sub.CheckArity(len(args)):
		return keyspace.Error(errorText(errWrongArgs))
	case sub.Name == "reset":
		return keyspace.Error(errorText(errNotAllowed))
	}
	return keyspace.Error(errorText(errNoCluster))
}

// commandCache remembers the commands scripts named in lower case, as most
// do: keyspace.Lookup lower-cases and hashes the whole name on every call,
// and scripts name the same few commands again and again. A slot is chosen
// from the name's length and first and last two bytes; names that share one
// replace each other. The command table never changes, so an entry never
// goes stale, and its name is the command's own, so remembering allocates
// nothing.
type commandCache [256]*keyspace.Command

func (c *commandCache) lookup(name []byte) *keyspace.Command {
	n := len(name)
	if n < 2 {
		return keyspace.Lookup(name)
	}
	k := uint64(n)<<32 | uint64(name[0])<<24 | uint64(name[1])<<16 | uint64(name[n-2])<<8 | uint64(name[n-1])
	slot := &c[k*0x9E3779B97F4A7C15>>56] // Fibonacci hashing to 8 bits
	if cmd := *slot; cmd != nil && cmd.Name == string(name) {
		return cmd
	}
	cmd := keyspace.Lookup(name)
	if cmd != nil && cmd.Name == string(name) {
		*slot = cmd
	}
	return cmd
}

// redisCall is redis.call (raise) and redis.pcall: it runs a command in the
// script's database at the entry's time and converts the reply.
func (v *vm) redisCall(L *lua.LState, raise bool) int {
	r := v.run
	args, msg := v.scriptArgs(L)
	if msg != "" {
		if raise {
			return raiseTable(L, msg)
		}
		L.Push(errorTable(L, msg))
		return 1
	}
	budget.Bytes(v, L, len(v.argBytes))
	reply, work := v.dispatch(r, args)
	v.Charge(L, work)
	if reply.IsError() {
		t := commandErrorTable(L, reply.Str)
		if raise {
			L.Error(t, 0)
		}
		L.Push(t)
		return 1
	}
	v.Charge(L, elements(reply))
	L.Push(v.toLua(L, reply, r.resp))
	return 1
}

// elements counts the elements of a reply, nested ones included: what
// converting it to Lua builds.
func elements(r keyspace.Reply) int64 {
	n := int64(len(r.Elems))
	for _, e := range r.Elems {
		if len(e.Elems) > 0 {
			n += elements(e)
		}
	}
	return n
}

// dispatch runs one command for a script, after the checks Redis's
// scriptCall makes, in its order. It returns the command's reply and its
// work beyond its arguments and reply (keyspace.Call.Work), which the
// budget is charged.
func (v *vm) dispatch(r *run, args [][]byte) (keyspace.Reply, int64) {
	if len(args) >= 2 && len(args[0]) == len("cluster") && strings.EqualFold(string(args[0]), "cluster") {
		return clusterFromScript(args), 0
	}
	cmd := v.lookupScriptCommand(args)
	if cmd == nil || !v.e.known(cmd) {
		return v.refuse(nil, errorText(errUnknownCmd))
	}
	if !cmd.CheckArity(len(args)) {
		return v.refuse(cmd, errorText(errWrongArgs))
	}
	if cmd.Has(keyspace.NoScript) || cmd.Run == nil {
		return v.refuse(cmd, errorText(errNotAllowed))
	}
	if u := v.e.user; u != nil && !u.Unrestricted() {
		if verdict := u.Check(cmd, args); verdict.Reason != acl.Allowed {
			v.e.denials = append(v.e.denials, acl.Denial{Reason: verdict.Reason, Object: verdict.Object(cmd, args), Username: u.Name()})
			return v.refuse(cmd, errorText(verdict.ScriptError()))
		}
	}
	// PUBLISH is a write for this purpose: Redis counts may-replicate commands.
	write := cmd.Flags&keyspace.Write != 0
	if r.readOnly && (write || cmd.Flags&keyspace.PubSub != 0) {
		return v.refuse(cmd, errorText(errWriteReadonly))
	}
	// Over maxmemory, a command that may grow memory is refused only while
	// the script has written nothing: past a write it cannot be stopped
	// half-way.
	if r.call.DenyOOM && cmd.Has(keyspace.DenyOOM) && !r.allowOOM && !r.wrote {
		return v.refuse(cmd, errorText(errOOM))
	}
	if r.dry && (write || cmd.Flags&keyspace.PubSub != 0) {
		r.wouldWrite = true // the caller's charge stops the script
		return keyspace.WouldWrite, 0
	}
	if write {
		r.wrote = true
	}
	c := &v.cmdCall
	*c = keyspace.Call{Store: r.call.Store, DB: r.call.DB, Now: r.call.Now, Args: args, Script: true, Pub: r.call.Pub, DenyOOM: r.call.DenyOOM}
	reply := v.execCall(cmd, c)
	r.call.DB = c.DB // SELECT inside a script changes the script's database only
	if r.monitor != nil {
		r.monitor(c.DB, args)
	}
	c.Args = nil
	return reply, c.Work
}

func (v *vm) redisSha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raiseTable(L, "wrong number of arguments")
	}
	var s string
	switch x := L.Get(1).(type) {
	case lua.LString:
		s = string(x)
	case lua.LNumber:
		s = clib.FormatNumber(float64(x))
	}
	budget.Scan(v, L, len(s))
	L.Push(lua.LString(sha1hex(s)))
	return 1
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// redisErrorReply returns {err=...}; a bad argument makes it return the
// error table rather than raise, as Redis does.
func (v *vm) redisErrorReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	budget.Scan(v, L, len(s)) // the error text is built anew
	text := string(s)
	if !strings.HasPrefix(text, "-") {
		text = "-" + text
	}
	L.Push(errorTable(L, text))
	return 1
}

func redisStatusReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	L.Push(wrap(L, "ok", s))
	return 1
}

// redisSetRepl validates its argument; commands, not their effects, are
// replicated here, so there is nothing to switch.
func redisSetRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raiseTable(L, "redis.set_repl() requires two arguments.")
	}
	flags := 0
	if n, ok := lualib.ToNumber(L.Get(1)); ok {
		flags = clib.ToInt(n)
	}
	if flags&^3 != 0 {
		return raiseTable(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

func (v *vm) redisSetResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raiseTable(L, "redis.setresp() requires one argument.")
	}
	resp := 0
	if n, ok := lualib.ToNumber(L.Get(1)); ok {
		resp = clib.ToInt(n)
	}
	if resp != 2 && resp != 3 {
		return raiseTable(L, "RESP version must be 2 or 3.")
	}
	v.run.resp = resp
	return 0
}

// redisACLCheckCmd answers whether the user running the script may run a
// command with the arguments given, as Redis's redis.acl_check_cmd does: it
// checks the command's permissions and its keys and channels, not its arity.
func (v *vm) redisACLCheckCmd(L *lua.LState) int {
	args, msg := v.scriptArgs(L)
	if msg != "" {
		return raiseTable(L, msg)
	}
	budget.Scan(v, L, len(v.argBytes))
	cmd := v.lookupScriptCommand(args)
	if cmd == nil {
		return raiseTable(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	u := v.e.user
	L.Push(lua.LBool(u == nil || u.Check(cmd, args).Reason == acl.Allowed))
	return 1
}

// Log levels of redis.log, and how they map to slog.
var logLevels = [...]slog.Level{slog.LevelDebug, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn}

func (v *vm) redisLog(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		return raiseTable(L, "redis.log() requires two arguments or more.")
	}
	f, ok := lualib.ToNumber(L.Get(1))
	if !ok {
		return raiseTable(L, "First argument must be a number (log level).")
	}
	level := clib.ToInt(f)
	if level < 0 || level > 3 {
		return raiseTable(L, "Invalid debug level.")
	}
	var b strings.Builder
	for i := 2; i <= n; i++ {
		s, ok := lualib.ToString(L.Get(i))
		if !ok {
			continue
		}
		if i != 2 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	budget.Bytes(v, L, b.Len())
	if log := v.e.opts.logger; log != nil {
		log.Log(context.Background(), logLevels[level], b.String(), "source", "script")
	}
	return 0
}

package luaexec

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/lockserver/lockserver/internal/splitargs"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec/internal/rdbfunc"
	lua "github.com/yuin/gopher-lua"
)

// Redis 7's functions: libraries of Lua functions that FUNCTION LOAD keeps
// under a name and FCALL calls by theirs. The libraries are replicated state,
// like the script cache: FUNCTION LOAD, DELETE, FLUSH and RESTORE go through
// the log and change them on every node alike, and a snapshot carries their
// code (Libraries, LoadLibraries).
//
// One difference from Redis, for determinism: Redis runs a library's code
// once, as it loads, and its functions keep whatever the code's locals hold
// from one call to the next until the server restarts. Here every FCALL
// runs the library's code afresh before its function, so a function sees
// its library as just loaded, on every node, after a restart or a snapshot
// as before: state kept in a library's locals would otherwise differ between
// a node that restarted and one that did not, and so would the writes of
// the functions that read it.

// library is a loaded function library.
type library struct {
	name  string // as its code's first line gives it
	code  string // the whole code, first line included
	proto *lua.FunctionProto
	pool  []lua.LValue
	// funcs are the functions its code registered, by name.
	funcs []*function
}

// function is a function a library registered.
type function struct {
	name    string
	desc    string
	hasDesc bool
	flags   int // shebang flags: no-writes, allow-oom, ...
	lib     *library
}

// libraries are the loaded libraries. A value is never changed once the
// engine publishes it (Engine.libs), so that Prepare may read it beside
// ExecAs; every change publishes a new one.
type libraries struct {
	byName map[string]*library  // by name
	funcs  map[string]*function // by lower-case name: FCALL's names are case-insensitive, as in Redis
}

func newLibraries() *libraries {
	return &libraries{byName: map[string]*library{}, funcs: map[string]*function{}}
}

// clone returns a copy of l that may be changed.
func (l *libraries) clone() *libraries {
	return &libraries{byName: maps.Clone(l.byName), funcs: maps.Clone(l.funcs)}
}

// remove unlinks lib and its functions.
func (l *libraries) remove(lib *library) {
	delete(l.byName, lib.name)
	for _, f := range lib.funcs {
		delete(l.funcs, strings.ToLower(f.name))
	}
}

// add links lib, or names the first of its functions that another library
// has registered.
func (l *libraries) add(lib *library) (collision string) {
	for _, f := range lib.funcs {
		if l.funcs[strings.ToLower(f.name)] != nil {
			return f.name
		}
	}
	l.byName[lib.name] = lib
	for _, f := range lib.funcs {
		l.funcs[strings.ToLower(f.name)] = f
	}
	return ""
}

// sorted returns the libraries ordered by name.
func (l *libraries) sorted() []*library {
	libs := slices.Collect(maps.Values(l.byName))
	slices.SortFunc(libs, func(a, b *library) int { return cmp.Compare(a.name, b.name) })
	return libs
}

func (e *Engine) libraries() *libraries { return e.libs.Load() }

// NumFunctions returns how many libraries are loaded and how many functions
// they hold.
func (e *Engine) NumFunctions() (libs, funcs int) {
	l := e.libraries()
	return len(l.byName), len(l.funcs)
}

// Libraries returns the code of every loaded library, ordered by name, for a
// snapshot.
func (e *Engine) Libraries() []string {
	var codes []string
	for _, lib := range e.libraries().sorted() {
		codes = append(codes, lib.code)
	}
	return codes
}

// LoadLibraries replaces the libraries with those of codes, from a snapshot.
// It fails if one does not load: the node that took the snapshot had loaded
// it, and a node without it would answer its functions differently.
func (e *Engine) LoadLibraries(codes []string) error {
	libs, r := e.loadAll(codes)
	if r != nil {
		return r.Err()
	}
	e.libs.Store(libs)
	return nil
}

// loadAll loads the libraries of codes, as FUNCTION LOAD does each, into a
// set of their own, or returns the error of the first that does not load,
// or whose name or functions another of them has.
func (e *Engine) loadAll(codes []string) (*libraries, *keyspace.Reply) {
	libs := newLibraries()
	for _, code := range codes {
		lib, r := e.newLibrary(code)
		if r != nil {
			return nil, r
		}
		if libs.byName[lib.name] != nil {
			r := errLibraryExists(lib.name)
			return nil, &r
		}
		if r := e.registerLibrary(lib); r != nil {
			return nil, r
		}
		if name := libs.add(lib); name != "" {
			r := errFunctionExists(name)
			return nil, &r
		}
	}
	return libs, nil
}

func errFunctionExists(name string) keyspace.Reply {
	return keyspace.Error("ERR Function " + name + " already exists")
}

// NotLoaded reports whether r refuses a script or a function because it is
// not loaded (NOSCRIPT, or FCALL's "Function not found"): what a load not
// yet applied would explain, where a client sent the call after the load
// without waiting for its reply.
func NotLoaded(r keyspace.Reply) bool {
	return r.Kind == keyspace.KindError && (strings.HasPrefix(r.Str, "NOSCRIPT") || r.Str == errFunctionNotFound.Str)
}

var (
	errFunctionNotFound = keyspace.Error("ERR Function not found")
	errBadLibraryName   = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
)

// Plan kinds of functions.
const (
	planFcall       = iota + planReplied + 1 // FCALL, FCALL_RO
	planFuncLoad                             // FUNCTION LOAD
	planFuncDelete                           // FUNCTION DELETE
	planFuncFlush                            // FUNCTION FLUSH
	planFuncRestore                          // FUNCTION RESTORE
)

// Policies of FUNCTION RESTORE.
const (
	restoreAppend = iota
	restoreReplace
	restoreFlush
)

func init() {
	for name, p := range map[string]planner{
		"fcall": (*Engine).planFcall, "fcall_ro": (*Engine).planFcall,
		"function|load": (*Engine).planFunctionLoad, "function|delete": planFunctionDelete,
		"function|flush": planFunctionFlush, "function|restore": planFunctionRestore,
		"function|list": (*Engine).planFunctionList, "function|dump": (*Engine).planFunctionDump,
		"function|stats": (*Engine).planFunctionStats, "function|kill": planReply(errNotBusy),
		"function|help": planReply(functionHelp()),
	} {
		keyspace.Register(keyspace.ScriptingLayer, name, p)
	}
}

// planFcall plans FCALL and FCALL_RO, in Redis's order of checks.
func (e *Engine) planFcall(cmd *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	p := plan{kind: planFcall, ro: cmd.Name == "fcall_ro", cached: true}
	if p.fn = e.libraries().funcs[strings.ToLower(string(args[1]))]; p.fn == nil {
		return errReply(errFunctionNotFound)
	}
	if r := p.splitKeys(args, keyspace.Error("ERR Bad number of keys provided")); r != nil {
		return plan{}, r
	}
	p.readOnly = p.ro || p.fn.flags&flagNoWrites != 0
	return p, nil
}

// planFunctionLoad plans FUNCTION LOAD [REPLACE] code: what can be checked
// without running the code (its first line, its name, whether it compiles).
func (e *Engine) planFunctionLoad(_ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	p := plan{kind: planFuncLoad}
	i := 2
	for ; i < len(args)-1; i++ {
		if !strings.EqualFold(string(args[i]), "replace") {
			return errReply(keyspace.Error("ERR Unknown option given: " + string(args[i])))
		}
		p.replace = true
	}
	if i >= len(args) {
		return errReply(keyspace.Error("ERR Function code is missing"))
	}
	lib, r := e.newLibrary(string(args[i]))
	if r != nil {
		return plan{}, r
	}
	// Whether the library exists is for the entry to find as it applies: a
	// FUNCTION DELETE before it may be in flight.
	p.libs = []*library{lib}
	return p, nil
}

func errLibraryExists(name string) keyspace.Reply {
	return keyspace.Error("ERR Library '" + name + "' already exists")
}

// newLibrary reads a library's first line and compiles its code, as FUNCTION
// LOAD does before it runs it.
func (e *Engine) newLibrary(code string) (*library, *keyspace.Reply) {
	fail := func(msg string) (*library, *keyspace.Reply) {
		r := keyspace.Error("ERR " + msg)
		return nil, &r
	}
	if len(code) > e.opts.maxScriptSize {
		r := e.errTooLarge(len(code))
		return nil, &r
	}
	if !strings.HasPrefix(code, "#!") {
		return fail("Missing library metadata")
	}
	end := strings.IndexByte(code, '\n')
	if end < 0 {
		return fail("Invalid library metadata")
	}
	line := code[:end]
	if i := strings.IndexByte(line, 0); i >= 0 {
		line = line[:i] // Redis reads the line as a C string
	}
	parts, ok := splitargs.Split(nil, []byte(line))
	if !ok || len(parts) == 0 {
		return fail("Invalid library metadata")
	}
	engine := string(parts[0][2:])
	var name []byte
	for _, part := range parts[1:] {
		if len(part) < 5 || !strings.EqualFold(string(part[:5]), "name=") {
			return fail("Invalid metadata value given: " + string(part))
		}
		if name != nil {
			return fail("Invalid metadata value, name argument was given multiple times")
		}
		name = part[5:]
	}
	switch {
	case name == nil:
		return fail("Library name was not given")
	case !validFunctionName(string(name)):
		return fail(errBadLibraryName)
	case !strings.EqualFold(engine, "lua"):
		return fail("Engine '" + engine + "' not found")
	}
	// The code runs from the end of the first line, so lines keep their
	// numbers.
	proto, pool, _, err := compileChunk(code[end:], libraryChunk, 1, 0, int(e.budget()), nil)
	if err != nil {
		return fail("Error compiling function: " + err.Error())
	}
	return &library{name: string(name), code: code, proto: proto, pool: pool}, nil
}

// validFunctionName reports whether name may name a library or a function:
// letters, digits and underscores, at least one.
func validFunctionName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// registerLibrary runs a new library's code, which registers its functions
// (vm.loadLibrary), and records them in it.
func (e *Engine) registerLibrary(lib *library) *keyspace.Reply {
	v := e.machine()
	fns, serr := v.loadLibrary(lib, e.budget())
	var r keyspace.Reply
	switch {
	case serr != nil:
		r = keyspace.Error("ERR Error registering functions: " + serr.msg)
	case len(fns) == 0:
		r = keyspace.Error("ERR No functions registered")
	default:
		lib.funcs = make([]*function, 0, len(fns))
		for _, f := range fns {
			f.info.lib = lib
			lib.funcs = append(lib.funcs, f.info)
		}
		slices.SortFunc(lib.funcs, func(a, b *function) int { return cmp.Compare(a.name, b.name) })
		return nil
	}
	return &r
}

// load applies FUNCTION LOAD: it runs the library's code and links it,
// replacing the library of its name when replace is set.
func (e *Engine) load(lib *library, replace bool) keyspace.Reply {
	libs := e.libraries().clone()
	old := libs.byName[lib.name]
	if old != nil {
		if !replace {
			return errLibraryExists(lib.name)
		}
		libs.remove(old)
	}
	if r := e.registerLibrary(lib); r != nil {
		return *r
	}
	if name := libs.add(lib); name != "" {
		return errFunctionExists(name)
	}
	e.libs.Store(libs)
	return keyspace.Bulk(lib.name)
}

// planFunctionDelete plans FUNCTION DELETE name. Whether the library
// exists is for the entry to find as it applies: a FUNCTION LOAD before it
// may be in flight.
func planFunctionDelete(_ *Engine, _ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	return plan{kind: planFuncDelete, name: string(args[2])}, nil
}

// delete applies FUNCTION DELETE.
func (e *Engine) delete(name string) keyspace.Reply {
	libs := e.libraries().clone()
	lib := libs.byName[name]
	if lib == nil {
		return keyspace.Error("ERR Library not found")
	}
	libs.remove(lib)
	e.libs.Store(libs)
	return keyspace.OK
}

// planFunctionFlush plans FUNCTION FLUSH [ASYNC|SYNC].
func planFunctionFlush(_ *Engine, _ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	switch {
	case len(args) > 3:
		return errReply(keyspace.ErrSubcommandSyntax(args))
	case len(args) == 3 && !strings.EqualFold(string(args[2]), "sync") && !strings.EqualFold(string(args[2]), "async"):
		return errReply(keyspace.Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"))
	}
	return plan{kind: planFuncFlush}, nil
}

// planFunctionRestore plans FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]:
// the payload is checked and read here; its libraries load as it applies.
func planFunctionRestore(_ *Engine, _ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	p := plan{kind: planFuncRestore}
	if len(args) > 4 {
		return errReply(keyspace.ErrSubcommandSyntax(args))
	}
	if len(args) == 4 {
		switch strings.ToLower(string(args[3])) {
		case "append":
		case "replace":
			p.policy = restoreReplace
		case "flush":
			p.policy = restoreFlush
		default:
			return errReply(keyspace.Error("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."))
		}
	}
	codes, msg := rdbfunc.Read(args[2])
	if msg != "" {
		return errReply(keyspace.Error("ERR " + msg))
	}
	p.codes = codes
	return p, nil
}

// restore applies FUNCTION RESTORE: every library of the payload loads, or
// none does.
func (e *Engine) restore(codes []string, policy int) keyspace.Reply {
	restored, r := e.loadAll(codes)
	if r != nil {
		return *r
	}
	libs := e.libraries().clone()
	if policy == restoreFlush {
		libs = newLibraries()
	}
	for _, lib := range restored.sorted() {
		if old := libs.byName[lib.name]; old != nil {
			if policy != restoreReplace {
				return keyspace.Error("ERR Library " + lib.name + " already exists")
			}
			libs.remove(old)
		}
	}
	for _, lib := range restored.sorted() {
		if name := libs.add(lib); name != "" {
			return errFunctionExists(name)
		}
	}
	e.libs.Store(libs)
	return keyspace.OK
}

// planFunctionList plans FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]:
// libraries in order of name, and their functions likewise (Redis lists them
// in the order of its hash tables).
func (e *Engine) planFunctionList(_ *keyspace.Command, args [][]byte) (plan, *keyspace.Reply) {
	var withCode bool
	var pattern []byte
	for i := 2; i < len(args); i++ {
		switch a := string(args[i]); {
		case !withCode && strings.EqualFold(a, "withcode"):
			withCode = true
		case pattern == nil && strings.EqualFold(a, "libraryname"):
			if i == len(args)-1 {
				return errReply(keyspace.Error("ERR library name argument was not given"))
			}
			i++
			pattern = args[i]
		default:
			return errReply(keyspace.Error("ERR Unknown argument " + a))
		}
	}
	out := []keyspace.Reply{}
	for _, lib := range e.libraries().sorted() {
		if pattern != nil && !keyspace.FoldGlobMatch(pattern, lib.name) {
			continue
		}
		funcs := make([]keyspace.Reply, len(lib.funcs))
		for i, f := range lib.funcs {
			desc := keyspace.Null
			if f.hasDesc {
				desc = keyspace.Bulk(f.desc)
			}
			var flags []keyspace.Reply
			for _, name := range flagNames(f.flags) {
				flags = append(flags, keyspace.Status(name))
			}
			funcs[i] = keyspace.Map(keyspace.Bulk("name"), keyspace.Bulk(f.name), keyspace.Bulk("description"), desc,
				keyspace.Bulk("flags"), keyspace.Reply{Kind: keyspace.KindSet, Elems: flags})
		}
		m := []keyspace.Reply{keyspace.Bulk("library_name"), keyspace.Bulk(lib.name), keyspace.Bulk("engine"), keyspace.Bulk("LUA"),
			keyspace.Bulk("functions"), keyspace.Array(funcs...)}
		if withCode {
			m = append(m, keyspace.Bulk("library_code"), keyspace.Bulk(lib.code))
		}
		out = append(out, keyspace.Map(m...))
	}
	return plan{kind: planReplied, reply: keyspace.Array(out...)}, nil
}

// planFunctionDump plans FUNCTION DUMP: the libraries in Redis's format,
// which FUNCTION RESTORE reads here and on redis-server alike.
func (e *Engine) planFunctionDump(*keyspace.Command, [][]byte) (plan, *keyspace.Reply) {
	return plan{kind: planReplied, reply: keyspace.Bulk(string(rdbfunc.Write(e.Libraries())))}, nil
}

// planFunctionStats plans FUNCTION STATS: no function is ever running when
// a command is, as scripts run inside the state machine.
func (e *Engine) planFunctionStats(*keyspace.Command, [][]byte) (plan, *keyspace.Reply) {
	libs, funcs := e.NumFunctions()
	return plan{kind: planReplied, reply: keyspace.Map(
		keyspace.Bulk("running_script"), keyspace.Null,
		keyspace.Bulk("engines"), keyspace.Map(keyspace.Bulk("LUA"), keyspace.Map(
			keyspace.Bulk("libraries_count"), keyspace.Int(int64(libs)),
			keyspace.Bulk("functions_count"), keyspace.Int(int64(funcs)))),
	)}, nil
}

// flagNames names the flags set in flags, in Redis's order.
func flagNames(flags int) []string {
	var names []string
	for bit := 1; bit <= flagAllowCrossSlot; bit <<= 1 {
		if flags&bit != 0 {
			for name, b := range shebangFlags {
				if b == bit {
					names = append(names, name)
				}
			}
		}
	}
	return names
}

// functionHelp is FUNCTION HELP's reply.
func functionHelp() keyspace.Reply {
	return helpReply(
		"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"LOAD [REPLACE] <FUNCTION CODE>",
		"    Create a new library with the given library name and code.",
		"DELETE <LIBRARY NAME>",
		"    Delete the given library.",
		"LIST [LIBRARYNAME PATTERN] [WITHCODE]",
		"    Return general information on all the libraries:",
		"    * Library name",
		"    * The engine used to run the Library",
		"    * Library description",
		"    * Functions list",
		"    * Library code (if WITHCODE is given)",
		"    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
		"STATS",
		"    Return information about the current function running:",
		"    * Function name",
		"    * Command used to run the function",
		"    * Duration in MS that the function is running",
		"    If no function is running, return nil",
		"    In addition, returns a list of available engines.",
		"KILL",
		"    Kill the current running function.",
		"FLUSH [ASYNC|SYNC]",
		"    Delete all the libraries.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the libraries.",
		"    * SYNC: Synchronously flush the libraries.",
		"DUMP",
		"    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
		"RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
		"    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
		"    control how to handle existing libraries (default APPEND):",
		"    * FLUSH: delete all existing libraries.",
		"    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
		"    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
		"      libraries with the new libraries (notice that even on this option there is a chance of failure",
		"      in case of functions name collision with another library).",
		"HELP",
		"    Prints this help.",
	)
}

// libraryChunk is the chunk name messages give a library's code.
const libraryChunk = "user_function"

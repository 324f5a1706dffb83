package server

import (
	"slices"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
)

// The server runs COMMAND and its subcommands, all built from the one
// command table.
func init() {
	registerHandlers(map[string]handler{
		"command": func(c *conn, args [][]byte) { c.reply(commandInfos(keyspace.Commands())) },
		"command|count": func(c *conn, args [][]byte) {
			c.reply(keyspace.Int(int64(len(keyspace.Commands()))))
		},
		"command|list":            cmdCommandList,
		"command|info":            cmdCommandInfo,
		"command|docs":            cmdCommandDocs,
		"command|getkeys":         func(c *conn, args [][]byte) { cmdCommandGetKeys(c, args, false) },
		"command|getkeysandflags": func(c *conn, args [][]byte) { cmdCommandGetKeys(c, args, true) },
		"command|help": help("COMMAND",
			"(no subcommand)", "    Return details about all commands.",
			"COUNT", "    Return the total number of commands.",
			"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]", "    Return the names of all commands, subcommands included.",
			"INFO [<command-name> ...]", "    Return details about the given commands, or all of them.",
			"DOCS [<command-name> ...]", "    Return what lockserver documents of the given commands, or all of them.",
			"GETKEYS <full-command>", "    Return the keys of a full command.",
			"GETKEYSANDFLAGS <full-command>", "    Return the keys and the access flags of a full command."),
	})
}

// commandInfos returns COMMAND INFO's entries for cmds.
func commandInfos(cmds []*keyspace.Command) keyspace.Reply {
	elems := make([]keyspace.Reply, len(cmds))
	for i, cmd := range cmds {
		elems[i] = commandInfo(cmd)
	}
	return keyspace.Array(elems...)
}

// commandInfo is Redis 7's ten-element description of a command: name,
// arity, flags, first key, last key, key step, ACL categories, tips, key
// specifications and subcommands. lockserver keeps no tips; the rest is what
// its table records.
func commandInfo(cmd *keyspace.Command) keyspace.Reply {
	var subs []keyspace.Reply
	for _, name := range sortedKeys(cmd.Subcommands) {
		subs = append(subs, commandInfo(cmd.Subcommands[name]))
	}
	return keyspace.Array(
		keyspace.Bulk(cmd.Name),
		keyspace.Int(int64(cmd.Arity)),
		statusSet(commandFlags(cmd)),
		keyspace.Int(int64(cmd.FirstKey)),
		keyspace.Int(int64(cmd.LastKey)),
		keyspace.Int(int64(cmd.KeyStep)),
		statusSet(cmd.Categories.Names()),
		statusSet(nil),
		keySpecs(cmd.KeySpecs),
		keyspace.Array(subs...),
	)
}

// keySpecs describes key specifications as COMMAND INFO does.
func keySpecs(specs []keyspace.KeySpec) keyspace.Reply {
	elems := make([]keyspace.Reply, len(specs))
	pair := func(k string, v keyspace.Reply) []keyspace.Reply { return []keyspace.Reply{keyspace.Bulk(k), v} }
	for i, s := range specs {
		var m []keyspace.Reply
		if s.Notes != "" {
			m = append(m, pair("notes", keyspace.Bulk(s.Notes))...)
		}
		m = append(m, pair("flags", statusSet(s.Flags.Names()))...)
		m = append(m, pair("begin_search", keyspace.Map(
			append(pair("type", keyspace.Bulk("index")), pair("spec", keyspace.Map(pair("index", keyspace.Int(int64(s.Index)))...))...)...))...)
		var find []keyspace.Reply
		if s.KeyNum {
			find = append(pair("type", keyspace.Bulk("keynum")), pair("spec", keyspace.Map(append(append(
				pair("keynumidx", keyspace.Int(int64(s.NumIdx))),
				pair("firstkey", keyspace.Int(int64(s.First)))...),
				pair("keystep", keyspace.Int(int64(s.Step)))...)...))...)
		} else {
			find = append(pair("type", keyspace.Bulk("range")), pair("spec", keyspace.Map(append(append(
				pair("lastkey", keyspace.Int(int64(s.LastKey))),
				pair("keystep", keyspace.Int(int64(s.Step)))...),
				pair("limit", keyspace.Int(int64(s.Limit)))...)...))...)
		}
		m = append(m, pair("find_keys", keyspace.Map(find...))...)
		elems[i] = keyspace.Map(m...)
	}
	return keyspace.Reply{Kind: keyspace.KindSet, Elems: elems}
}

func statusSet(items []string) keyspace.Reply {
	elems := make([]keyspace.Reply, len(items))
	for i, s := range items {
		elems[i] = keyspace.Status(s)
	}
	return keyspace.Reply{Kind: keyspace.KindSet, Elems: elems}
}

// commandFlags names a command's flags as Redis's COMMAND does; a container
// command has none of its own.
func commandFlags(cmd *keyspace.Command) []string {
	if cmd.Subcommands != nil {
		return nil
	}
	var flags []string
	for _, f := range []struct {
		flag keyspace.Flags
		name string
	}{
		{keyspace.Write, "write"}, {keyspace.ReadOnly, "readonly"}, {keyspace.DenyOOM, "denyoom"},
		{keyspace.Admin, "admin"}, {keyspace.PubSub, "pubsub"}, {keyspace.NoScript, "noscript"},
		{keyspace.Fast, "fast"},
	} {
		if cmd.Has(f.flag) {
			flags = append(flags, f.name)
		}
	}
	if noAuth(cmd) {
		flags = append(flags, "no_auth")
	}
	if cmd.MovableKeys() {
		flags = append(flags, "movablekeys")
	}
	return flags
}

func sortedKeys(m map[string]*keyspace.Command) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// allNames returns every command's name and its subcommands' full names.
func allNames() []*keyspace.Command {
	var all []*keyspace.Command
	for _, cmd := range keyspace.Commands() {
		all = append(all, cmd)
		for _, name := range sortedKeys(cmd.Subcommands) {
			all = append(all, cmd.Subcommands[name])
		}
	}
	return all
}

// COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN pattern]
func cmdCommandList(c *conn, args [][]byte) {
	var keep func(cmd *keyspace.Command) bool
	switch {
	case len(args) == 2:
		keep = func(*keyspace.Command) bool { return true }
	case len(args) == 5 && strings.EqualFold(string(args[2]), "filterby"):
		v := args[4]
		switch strings.ToLower(string(args[3])) {
		case "module":
			keep = func(*keyspace.Command) bool { return false } // lockserver has no modules
		case "aclcat":
			keep = func(cmd *keyspace.Command) bool {
				return cmd.Categories&keyspace.CategoryByName(string(v)) != 0
			}
		case "pattern":
			keep = func(cmd *keyspace.Command) bool { return keyspace.FoldGlobMatch(v, cmd.Name) }
		}
	}
	if keep == nil {
		c.reply(keyspace.ErrSyntax)
		return
	}
	var names []string
	for _, cmd := range allNames() {
		if keep(cmd) {
			names = append(names, cmd.Name)
		}
	}
	c.reply(keyspace.BulkArray(names))
}

// lookupFull finds a command or subcommand by its full name ("client|id").
func lookupFull(name []byte) *keyspace.Command {
	parent, sub, found := strings.Cut(string(name), "|")
	cmd := keyspace.Lookup([]byte(parent))
	if cmd == nil || !found {
		return cmd
	}
	return cmd.LookupSub([]byte(sub))
}

// COMMAND INFO [name ...]: a null for each unknown name.
func cmdCommandInfo(c *conn, args [][]byte) {
	if len(args) == 2 {
		c.reply(commandInfos(keyspace.Commands()))
		return
	}
	elems := make([]keyspace.Reply, len(args)-2)
	for i, name := range args[2:] {
		if cmd := lookupFull(name); cmd != nil {
			elems[i] = commandInfo(cmd)
		} else {
			elems[i] = keyspace.Null
		}
	}
	c.reply(keyspace.Array(elems...))
}

// COMMAND DOCS [name ...]: a map from name to what lockserver documents of the
// command: its group (lockserver keeps no summaries), and its subcommands'.
func cmdCommandDocs(c *conn, args [][]byte) {
	cmds := keyspace.Commands()
	if len(args) > 2 {
		cmds = cmds[:0:0]
		for _, name := range args[2:] {
			if cmd := lookupFull(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	var elems []keyspace.Reply
	for _, cmd := range cmds {
		elems = append(elems, keyspace.Bulk(cmd.Name), commandDoc(cmd))
	}
	c.reply(keyspace.Map(elems...))
}

func commandDoc(cmd *keyspace.Command) keyspace.Reply {
	doc := []keyspace.Reply{keyspace.Bulk("group"), keyspace.Bulk(commandGroup(cmd))}
	if len(cmd.Subcommands) > 0 {
		var subs []keyspace.Reply
		for _, name := range sortedKeys(cmd.Subcommands) {
			sub := cmd.Subcommands[name]
			subs = append(subs, keyspace.Bulk(sub.Name), commandDoc(sub))
		}
		doc = append(doc, keyspace.Bulk("subcommands"), keyspace.Map(subs...))
	}
	return keyspace.Map(doc...)
}

// commandGroup is the Redis documentation group a command belongs to, as far
// as its flags tell.
func commandGroup(cmd *keyspace.Command) string {
	switch {
	case cmd.Has(keyspace.Transaction):
		return "transactions"
	case cmd.Has(keyspace.PubSub):
		return "pubsub"
	case cmd.Has(keyspace.Scripting):
		return "scripting"
	case cmd.Has(keyspace.Admin):
		return "server"
	case cmd.Has(keyspace.Connection):
		return "connection"
	}
	return "generic"
}

// COMMAND GETKEYS command [arg ...] and COMMAND GETKEYSANDFLAGS, in
// Redis 7.0's order of checks.
func cmdCommandGetKeys(c *conn, args [][]byte, withFlags bool) {
	full := args[2:]
	cmd := keyspace.Lookup(full[0])
	if cmd != nil {
		cmd = cmd.Resolve(full)
	}
	switch {
	case cmd == nil:
		c.reply(keyspace.Error("ERR Invalid command specified"))
		return
	case !cmd.HasKeys():
		c.reply(keyspace.Error("ERR The command has no key arguments"))
		return
	case !cmd.CheckArity(len(full)):
		c.reply(keyspace.Error("ERR Invalid number of arguments specified for command"))
		return
	}
	refs := cmd.KeyRefs(full, nil)
	if len(refs) == 0 {
		if cmd.MovableKeys() { // Redis's no_mandatory_keys: EVAL and its kin
			c.reply(keyspace.Array())
		} else {
			c.reply(keyspace.Error("ERR Invalid arguments specified for command"))
		}
		return
	}
	keys := make([]keyspace.Reply, len(refs))
	for i, r := range refs {
		keys[i] = keyspace.BulkBytes(full[r.Pos])
		if withFlags {
			keys[i] = keyspace.Array(keys[i], statusSet(r.Flags.Names()))
		}
	}
	c.reply(keyspace.Array(keys...))
}

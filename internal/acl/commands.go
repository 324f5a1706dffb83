package acl

import (
	"bytes"
	"slices"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
)

// command is a command as ACL rules know it: one of the command table's,
// with its ID there, or one of Redis 7.0's that lockserver does not serve
// (redisOnly), numbered after them.
type command struct {
	name   string // the full name: "get", "config|get"
	id     int
	cats   keyspace.Category
	parent *command
	subs   []*command // in name order
}

// commandTable is every command ACL rules know, in name order, with
// subcommands under their containers, and by full name.
type commandTable struct {
	top    []*command
	byName map[string]*command
	n      int
}

var (
	table   = buildTable()
	numBits = table.n + 1
	allBit  = numBits - 1
)

func buildTable() *commandTable {
	t := &commandTable{byName: map[string]*command{}, n: keyspace.NumIDs()}
	add := func(c *command) {
		if t.byName[c.name] != nil {
			panic("acl: " + c.name + " is in redisOnly and in the command table")
		}
		t.byName[c.name] = c
		if parent, _, ok := strings.Cut(c.name, "|"); ok {
			p := t.byName[parent]
			c.parent = p
			p.subs = append(p.subs, c)
		} else {
			t.top = append(t.top, c)
		}
	}
	for _, cmd := range keyspace.Commands() {
		add(&command{name: cmd.Name, id: cmd.ID, cats: cmd.Categories})
		for _, sub := range cmd.Subcommands {
			add(&command{name: sub.Name, id: sub.ID, cats: sub.Categories})
		}
	}
	for _, r := range redisOnly {
		add(&command{name: r.name, id: t.n, cats: r.cats})
		t.n++
	}
	slices.SortFunc(t.top, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	for _, c := range t.top {
		slices.SortFunc(c.subs, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	}
	return t
}

// each calls f for every command and subcommand, each container before its
// subcommands.
func (t *commandTable) each(f func(c *command)) {
	for _, c := range t.top {
		f(c)
		for _, sub := range c.subs {
			f(sub)
		}
	}
}

// lookupCommand finds a command or subcommand by its full name, in any case,
// as Redis's ACLLookupCommand does: "get", "config|get"; a name with a
// subcommand part must name a subcommand of a container.
func lookupCommand(name []byte) *command {
	if bytes.Count(name, []byte("|")) > 1 {
		return nil
	}
	return table.byName[strings.ToLower(string(name))]
}

// CategoryCommands returns the names of the commands and subcommands of a
// category, as ACL CAT lists them: Redis 7.0's that lockserver does not
// serve too, which ACL rules may name.
func CategoryCommands(cat keyspace.Category) []string {
	var names []string
	table.each(func(c *command) {
		if c.cats&cat != 0 {
			names = append(names, c.name)
		}
	})
	return names
}

// redisOnly are the commands and subcommands of Redis 7.0 that lockserver
// does not serve, with their ACL categories (Redis's COMMAND INFO). ACL rules
// may name them, as rules written for Redis do (+@all -debug), and the
// categories count them, so that ACL LIST describes a user as Redis does;
// no client can run them.
var redisOnly = []struct {
	name string
	cats keyspace.Category
}{
	{"bgrewriteaof", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"bgsave", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"bitcount", keyspace.CatRead | keyspace.CatBitmap | keyspace.CatSlow},
	{"bitfield", keyspace.CatWrite | keyspace.CatBitmap | keyspace.CatSlow},
	{"bitfield_ro", keyspace.CatRead | keyspace.CatBitmap | keyspace.CatFast},
	{"bitop", keyspace.CatWrite | keyspace.CatBitmap | keyspace.CatSlow},
	{"bitpos", keyspace.CatRead | keyspace.CatBitmap | keyspace.CatSlow},
	{"blmove", keyspace.CatWrite | keyspace.CatList | keyspace.CatSlow | keyspace.CatBlocking},
	{"blmpop", keyspace.CatWrite | keyspace.CatList | keyspace.CatSlow | keyspace.CatBlocking},
	{"blpop", keyspace.CatWrite | keyspace.CatList | keyspace.CatSlow | keyspace.CatBlocking},
	{"brpop", keyspace.CatWrite | keyspace.CatList | keyspace.CatSlow | keyspace.CatBlocking},
	{"brpoplpush", keyspace.CatWrite | keyspace.CatList | keyspace.CatSlow | keyspace.CatBlocking},
	{"bzmpop", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatSlow | keyspace.CatBlocking},
	{"bzpopmax", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatFast | keyspace.CatBlocking},
	{"bzpopmin", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatFast | keyspace.CatBlocking},
	{"cluster|addslots", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|addslotsrange", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|bumpepoch", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|count-failure-reports", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|delslots", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|delslotsrange", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|failover", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|flushslots", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|forget", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|links", keyspace.CatSlow},
	{"cluster|meet", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|replicas", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|replicate", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|reset", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|saveconfig", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|set-config-epoch", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|setslot", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"cluster|slaves", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"debug", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"dump", keyspace.CatKeyspace | keyspace.CatRead | keyspace.CatSlow},
	{"failover", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"georadius", keyspace.CatWrite | keyspace.CatGeo | keyspace.CatSlow},
	{"georadius_ro", keyspace.CatRead | keyspace.CatGeo | keyspace.CatSlow},
	{"georadiusbymember", keyspace.CatWrite | keyspace.CatGeo | keyspace.CatSlow},
	{"georadiusbymember_ro", keyspace.CatRead | keyspace.CatGeo | keyspace.CatSlow},
	{"geosearch", keyspace.CatRead | keyspace.CatGeo | keyspace.CatSlow},
	{"geosearchstore", keyspace.CatWrite | keyspace.CatGeo | keyspace.CatSlow},
	{"getbit", keyspace.CatRead | keyspace.CatBitmap | keyspace.CatFast},
	{"hrandfield", keyspace.CatRead | keyspace.CatHash | keyspace.CatSlow},
	{"lastsave", keyspace.CatAdmin | keyspace.CatFast | keyspace.CatDangerous},
	{"latency|graph", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"lcs", keyspace.CatRead | keyspace.CatString | keyspace.CatSlow},
	{"lmpop", keyspace.CatWrite | keyspace.CatList | keyspace.CatSlow},
	{"lolwut", keyspace.CatRead | keyspace.CatFast},
	{"memory|malloc-stats", keyspace.CatSlow},
	{"memory|stats", keyspace.CatSlow},
	{"migrate", keyspace.CatKeyspace | keyspace.CatWrite | keyspace.CatSlow | keyspace.CatDangerous},
	{"module", keyspace.CatSlow},
	{"module|help", keyspace.CatSlow},
	{"module|list", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"module|load", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"module|loadex", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"module|unload", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"object", keyspace.CatSlow},
	{"object|encoding", keyspace.CatKeyspace | keyspace.CatRead | keyspace.CatSlow},
	{"object|freq", keyspace.CatKeyspace | keyspace.CatRead | keyspace.CatSlow},
	{"object|help", keyspace.CatKeyspace | keyspace.CatSlow},
	{"object|idletime", keyspace.CatKeyspace | keyspace.CatRead | keyspace.CatSlow},
	{"object|refcount", keyspace.CatKeyspace | keyspace.CatRead | keyspace.CatSlow},
	{"pfadd", keyspace.CatWrite | keyspace.CatHyperLogLog | keyspace.CatFast},
	{"pfcount", keyspace.CatRead | keyspace.CatHyperLogLog | keyspace.CatSlow},
	{"pfdebug", keyspace.CatWrite | keyspace.CatHyperLogLog | keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"pfmerge", keyspace.CatWrite | keyspace.CatHyperLogLog | keyspace.CatSlow},
	{"pfselftest", keyspace.CatHyperLogLog | keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"psync", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"randomkey", keyspace.CatKeyspace | keyspace.CatRead | keyspace.CatSlow},
	{"replconf", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"replicaof", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"restore", keyspace.CatKeyspace | keyspace.CatWrite | keyspace.CatSlow | keyspace.CatDangerous},
	{"restore-asking", keyspace.CatKeyspace | keyspace.CatWrite | keyspace.CatSlow | keyspace.CatDangerous},
	{"save", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"sdiffstore", keyspace.CatWrite | keyspace.CatSet | keyspace.CatSlow},
	{"setbit", keyspace.CatWrite | keyspace.CatBitmap | keyspace.CatSlow},
	{"shutdown", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"sintercard", keyspace.CatRead | keyspace.CatSet | keyspace.CatSlow},
	{"sinterstore", keyspace.CatWrite | keyspace.CatSet | keyspace.CatSlow},
	{"slaveof", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"smove", keyspace.CatWrite | keyspace.CatSet | keyspace.CatFast},
	{"sort", keyspace.CatWrite | keyspace.CatSet | keyspace.CatSortedSet | keyspace.CatList | keyspace.CatSlow | keyspace.CatDangerous},
	{"sort_ro", keyspace.CatRead | keyspace.CatSet | keyspace.CatSortedSet | keyspace.CatList | keyspace.CatSlow | keyspace.CatDangerous},
	{"spop", keyspace.CatWrite | keyspace.CatSet | keyspace.CatFast},
	{"srandmember", keyspace.CatRead | keyspace.CatSet | keyspace.CatSlow},
	{"substr", keyspace.CatRead | keyspace.CatString | keyspace.CatSlow},
	{"sunionstore", keyspace.CatWrite | keyspace.CatSet | keyspace.CatSlow},
	{"sync", keyspace.CatAdmin | keyspace.CatSlow | keyspace.CatDangerous},
	{"xack", keyspace.CatWrite | keyspace.CatStream | keyspace.CatFast},
	{"xadd", keyspace.CatWrite | keyspace.CatStream | keyspace.CatFast},
	{"xautoclaim", keyspace.CatWrite | keyspace.CatStream | keyspace.CatFast},
	{"xclaim", keyspace.CatWrite | keyspace.CatStream | keyspace.CatFast},
	{"xdel", keyspace.CatWrite | keyspace.CatStream | keyspace.CatFast},
	{"xgroup", keyspace.CatSlow},
	{"xgroup|create", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow},
	{"xgroup|createconsumer", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow},
	{"xgroup|delconsumer", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow},
	{"xgroup|destroy", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow},
	{"xgroup|help", keyspace.CatStream | keyspace.CatSlow},
	{"xgroup|setid", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow},
	{"xinfo", keyspace.CatSlow},
	{"xinfo|consumers", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow},
	{"xinfo|groups", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow},
	{"xinfo|help", keyspace.CatStream | keyspace.CatSlow},
	{"xinfo|stream", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow},
	{"xlen", keyspace.CatRead | keyspace.CatStream | keyspace.CatFast},
	{"xpending", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow},
	{"xrange", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow},
	{"xread", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow | keyspace.CatBlocking},
	{"xreadgroup", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow | keyspace.CatBlocking},
	{"xrevrange", keyspace.CatRead | keyspace.CatStream | keyspace.CatSlow},
	{"xsetid", keyspace.CatWrite | keyspace.CatStream | keyspace.CatFast},
	{"xtrim", keyspace.CatWrite | keyspace.CatStream | keyspace.CatSlow},
	{"zdiff", keyspace.CatRead | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zdiffstore", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zinter", keyspace.CatRead | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zintercard", keyspace.CatRead | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zinterstore", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zlexcount", keyspace.CatRead | keyspace.CatSortedSet | keyspace.CatFast},
	{"zmpop", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zrandmember", keyspace.CatRead | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zrangestore", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zunion", keyspace.CatRead | keyspace.CatSortedSet | keyspace.CatSlow},
	{"zunionstore", keyspace.CatWrite | keyspace.CatSortedSet | keyspace.CatSlow},
}

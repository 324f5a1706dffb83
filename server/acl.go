package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

// ACL is Redis 7.0's. The users are the engine's: replicated state, which ACL
// SETUSER, DELUSER and LOAD change through the log, as they change on every
// member. Everything else about them is this node's: the connections
// authenticated as them, the checks of what those run, the ACL log and its
// counts, and the ACL file that LOAD reads and SAVE writes.

// The server runs ACL's subcommands but DELUSER, which goes to the engine as
// it is.
func init() {
	registerHandlers(map[string]handler{
		"acl|cat":     cmdACLCat,
		"acl|dryrun":  cmdACLDryRun,
		"acl|genpass": cmdACLGenPass,
		"acl|getuser": cmdACLGetUser,
		"acl|list":    func(c *conn, args [][]byte) { cmdACLList(c, false) },
		"acl|users":   func(c *conn, args [][]byte) { cmdACLList(c, true) },
		"acl|whoami":  func(c *conn, args [][]byte) { c.reply(keyspace.Bulk(c.user.Load().User().Name())) },
		"acl|log":     cmdACLLog,
		"acl|save":    cmdACLSave,
		"acl|load":    cmdACLLoad,
		"acl|setuser": cmdACLSetUser,
		"acl|help": help("ACL",
			"CAT [<category>]", "    List all commands that belong to <category>, or all command categories",
			"    when no category is specified.",
			"DELUSER <username> [<username> ...]", "    Delete a list of users.",
			"DRYRUN <username> <command> [<arg> ...]", "    Returns whether the user can execute the given command without executing the command.",
			"GETUSER <username>", "    Get the user's details.",
			"GENPASS [<bits>]", "    Generate a secure 256-bit user password. The optional `bits` argument can",
			"    be used to specify a different size.",
			"LIST", "    Show users details in config file format.",
			"LOAD", "    Reload users from the ACL file.",
			"LOG [<count> | RESET]", "    Show the ACL log entries.",
			"SAVE", "    Save the current config to the ACL file.",
			"SETUSER <username> <attribute> [<attribute> ...]", "    Create or modify a user with the specified attributes.",
			"USERS", "    List all the registered usernames.",
			"WHOAMI", "    Return the current connection username."),
	})
}

// checkACL checks a command about to run, or to be queued, against the
// connection's user u, as Redis's processCommand does after authentication,
// and answers and logs a refusal. It reports whether the command may go on.
// The caller spares a user allowed everything (User.Unrestricted) the call.
func (c *conn) checkACL(u *acl.User, cmd *keyspace.Command, args [][]byte) bool {
	v := u.Check(cmd, args)
	if v.Reason == acl.Allowed {
		return true
	}
	c.denyACL(v, u.Name(), cmd, args)
	return false
}

// denyACL answers and logs the refusal v of a command to user username.
func (c *conn) denyACL(v acl.Verdict, username string, cmd *keyspace.Command, args [][]byte) {
	ctx := acl.ContextTopLevel
	if c.multi != nil {
		ctx = acl.ContextMulti
	}
	c.logDenied(v.Reason, ctx, v.Object(cmd, args), username)
	c.reject(cmd, keyspace.Error(v.Error(cmd)))
}

// logDenied records a refusal in the ACL log and INFO's counts.
func (c *conn) logDenied(reason acl.Reason, context, object, username string) {
	c.srv.aclLog.Add(acl.LogEntry{
		Reason: reason, Context: context, Object: object, Username: username,
		Time: time.Now(), ClientInfo: c.describe(),
	})
	c.srv.stats.aclDenied[reason].Add(1)
}

// logScriptDenials records what the engine refused a script of this
// connection (see replication.Request.Denials).
func (c *conn) logScriptDenials(req *replication.Request) {
	if req.Denials == nil {
		return
	}
	for _, d := range req.Denials {
		c.logDenied(d.Reason, acl.ContextLua, d.Object, d.Username)
	}
}

// authRequired reports whether a connection that has not authenticated must
// before it runs anything but AUTH and HELLO: unless the default user is on
// and needs no password, as in Redis.
func (s *Server) authRequired() bool {
	u := s.acl.Default().User()
	return !u.NoPass() || !u.Enabled()
}

// setDefaultAuth makes the connection the default user's, authenticated if
// that user is on and needs no password, as at connect.
func (c *conn) setDefaultAuth() {
	slot := c.srv.acl.Default()
	c.user.Store(slot)
	u := slot.User()
	c.authed = u.NoPass() && u.Enabled()
}

// authenticate checks credentials and, if they are good, authenticates the
// connection as that user; a failure is logged and leaves the connection as
// it was.
func (c *conn) authenticate(user, pass []byte) bool {
	slot := c.srv.acl.Authenticate(user, pass)
	if slot == nil {
		ctx := acl.ContextTopLevel
		if c.multi != nil {
			ctx = acl.ContextMulti
		}
		c.logDenied(acl.DeniedAuth, ctx, string(c.cur.args[0]), string(user))
		return false
	}
	c.user.Store(slot)
	c.authed = true
	return true
}

// usersChanged handles a change of the users as Redis does: the connections
// of a deleted user are closed (once the command running now, if it is
// theirs, has its reply), and a subscriber whose user lost channels it is
// subscribed to is closed at once. It runs in the engine's goroutine, as the
// change is applied.
func (s *Server) usersChanged(ch acl.Change) {
	if len(ch.Deleted) > 0 {
		var gone []*conn
		s.each(func(c *conn) {
			slot := c.user.Load()
			for _, d := range ch.Deleted {
				if slot == d {
					gone = append(gone, c)
				}
			}
		})
		for _, c := range gone {
			c.shutdown(shutdownGrace)
		}
	}
	for _, up := range ch.Updated {
		if acl.ChannelsRevoked(up.Old, up.New) {
			s.hub.revoke(up.Slot, up.New)
		}
	}
}

// errNoACLFile is Redis's reply to ACL LOAD and SAVE without an ACL file.
var errNoACLFile = keyspace.Error("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")

// runEngine submits a request of the connection's and waits for its reply.
func (c *conn) runEngine(req *replication.Request) keyspace.Reply {
	c.srv.engine.Submit(req)
	return c.wait(req)
}

// ACL SETUSER username rule ...: a password travels to the engine, and into
// the log, only as its hash. Rules are checked here first, against this
// node's users, so that a refusal names the rule as it was given.
func cmdACLSetUser(c *conn, args [][]byte) {
	if err := c.srv.acl.CheckSetUser(args[2], args[3:]); err != nil {
		c.reply(keyspace.Error("ERR " + err.Error()))
		return
	}
	c.reply(c.runEngine(&replication.Request{DB: c.db, Cmds: [][][]byte{hashPasswords(args)}}))
}

// hashPasswords returns ACL SETUSER's arguments with each password rule,
// >password and <password, replaced by its hash form, #hash and !hash,
// which means the same.
func hashPasswords(args [][]byte) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = a
		if i >= 3 && len(a) > 0 && (a[0] == '>' || a[0] == '<') {
			sign := byte('#')
			if a[0] == '<' {
				sign = '!'
			}
			out[i] = append([]byte{sign}, acl.HashPassword(a[1:])...)
		}
	}
	return out
}

// ACL LOAD reads the ACL file on this node and replaces every user with its
// users on every member.
func cmdACLLoad(c *conn, args [][]byte) {
	load, errReply := c.srv.aclLoadArgs()
	if errReply != nil {
		c.reply(*errReply)
		return
	}
	c.reply(c.runEngine(&replication.Request{DB: c.db, Cmds: [][][]byte{load}}))
}

// aclLoadArgs reads the ACL file and returns the command that loads its
// users in the engine, or the error to answer.
func (s *Server) aclLoadArgs() ([][]byte, *keyspace.Reply) {
	if s.aclFile == "" {
		return nil, &errNoACLFile
	}
	users, err := ReadACLFile(s.aclFile)
	if err != nil {
		r := keyspace.Error("ERR " + err.Error())
		return nil, &r
	}
	return replication.LoadUsersCommand(users, false), nil
}

// ReadACLFile reads the users of an ACL file, with the error ACL LOAD
// answers when it cannot.
func ReadACLFile(path string) ([]*acl.User, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		// C's strerror words, as Go's are but for the capital.
		why := errors.Unwrap(err).Error()
		why = strings.ToUpper(why[:1]) + why[1:]
		return nil, fmt.Errorf("Error loading ACLs, opening file '%s': %s", path, why) //lint:ignore ST1005 Redis's text
	}
	return acl.ParseFile(text, path)
}

// ACL SAVE writes the users to the ACL file, through a temporary file that
// replaces it, as Redis does.
func cmdACLSave(c *conn, args [][]byte) {
	if c.srv.aclFile == "" {
		c.reply(errNoACLFile)
		return
	}
	if err := writeFileAtomic(c.srv.aclFile, acl.File(c.srv.acl.Users())); err != nil {
		c.srv.log.Warn("ACL SAVE failed", "file", c.srv.aclFile, "err", err)
		c.reply(keyspace.Error("ERR There was an error trying to save the ACLs. Please check the server logs for more information"))
		return
	}
	c.reply(keyspace.OK)
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ACL CAT [category]
func cmdACLCat(c *conn, args [][]byte) {
	if len(args) == 2 {
		c.reply(keyspace.BulkArray(keyspace.CategoryNames()))
		return
	}
	if len(args) != 3 {
		c.reply(keyspace.ErrSubcommandSyntax(args))
		return
	}
	cat := keyspace.CategoryByName(string(args[2]))
	if cat == 0 {
		name := args[2]
		if len(name) > 128 {
			name = name[:128]
		}
		c.reply(keyspace.Error("ERR Unknown category '" + string(name) + "'"))
		return
	}
	c.reply(keyspace.BulkArray(acl.CategoryCommands(cat)))
}

// ACL GETUSER username
func cmdACLGetUser(c *conn, args [][]byte) {
	u := c.srv.acl.Get(args[2])
	if u == nil {
		c.reply(keyspace.Null)
		return
	}
	describe := func(s acl.SelectorInfo) []keyspace.Reply {
		return []keyspace.Reply{
			keyspace.Bulk("commands"), keyspace.Bulk(s.Commands),
			keyspace.Bulk("keys"), keyspace.Bulk(s.Keys),
			keyspace.Bulk("channels"), keyspace.Bulk(s.Channels),
		}
	}
	root, others := u.Selectors()
	selectors := make([]keyspace.Reply, len(others))
	for i, s := range others {
		selectors[i] = keyspace.Map(describe(s)...)
	}
	fields := []keyspace.Reply{
		keyspace.Bulk("flags"), bulkSet(u.Flags()),
		keyspace.Bulk("passwords"), keyspace.BulkArray(u.Passwords()),
	}
	fields = append(fields, describe(root)...)
	fields = append(fields, keyspace.Bulk("selectors"), keyspace.Array(selectors...))
	c.reply(keyspace.Map(fields...))
}

func bulkSet(items []string) keyspace.Reply {
	r := keyspace.BulkArray(items)
	r.Kind = keyspace.KindSet
	return r
}

// ACL LIST and ACL USERS
func cmdACLList(c *conn, namesOnly bool) {
	users := c.srv.acl.Users()
	lines := make([]string, len(users))
	for i, u := range users {
		if namesOnly {
			lines[i] = u.Name()
		} else {
			lines[i] = "user " + u.Name() + " " + u.Describe()
		}
	}
	c.reply(keyspace.BulkArray(lines))
}

// ACL DRYRUN username command [arg ...]
func cmdACLDryRun(c *conn, args [][]byte) {
	u := c.srv.acl.Get(args[2])
	if u == nil {
		c.reply(keyspace.Error("ERR User '" + string(args[2]) + "' not found"))
		return
	}
	full := args[3:]
	cmd := keyspace.Lookup(full[0])
	if cmd != nil && cmd.Subcommands != nil && len(full) >= 2 {
		cmd = cmd.LookupSub(full[1])
	}
	if cmd == nil {
		c.reply(keyspace.Error("ERR Command '" + string(full[0]) + "' not found"))
		return
	}
	if !cmd.CheckArity(len(full)) {
		c.reply(keyspace.Error("ERR wrong number of arguments for '" + cmd.Name + "' command"))
		return
	}
	if v := u.Check(cmd, full); v.Reason != acl.Allowed {
		c.reply(keyspace.Bulk(v.DryRun(cmd, full)))
		return
	}
	c.reply(keyspace.OK)
}

// ACL GENPASS [bits]: random hex, 256 bits unless told.
func cmdACLGenPass(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.reply(keyspace.ErrSubcommandSyntax(args))
		return
	}
	bits := int64(256)
	if len(args) == 3 {
		n, ok := keyspace.ParseInt(args[2])
		if !ok {
			c.reply(keyspace.ErrNotInteger)
			return
		}
		bits = n
	}
	if bits <= 0 || bits > 4096 {
		c.reply(keyspace.Error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"))
		return
	}
	b := make([]byte, (bits+7)/8)
	rand.Read(b)
	c.reply(keyspace.Bulk(hex.EncodeToString(b)[:(bits+3)/4]))
}

// ACL LOG [count | RESET]
func cmdACLLog(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.reply(keyspace.ErrSubcommandSyntax(args))
		return
	}
	count := int64(10)
	if len(args) == 3 {
		if bytes.EqualFold(args[2], []byte("reset")) {
			c.srv.aclLog.Reset()
			c.reply(keyspace.OK)
			return
		}
		n, ok := keyspace.ParseInt(args[2])
		if !ok {
			c.reply(keyspace.ErrNotInteger)
			return
		}
		count = max(n, 0)
	}
	now := time.Now()
	entries := c.srv.aclLog.Entries(int(min(count, 1<<30)))
	out := make([]keyspace.Reply, len(entries))
	for i, e := range entries {
		age := float64(now.Sub(e.Time).Milliseconds()) / 1000
		out[i] = keyspace.Map(
			keyspace.Bulk("count"), keyspace.Int(e.Count),
			keyspace.Bulk("reason"), keyspace.Bulk(e.Reason.String()),
			keyspace.Bulk("context"), keyspace.Bulk(e.Context),
			keyspace.Bulk("object"), keyspace.Bulk(e.Object),
			keyspace.Bulk("username"), keyspace.Bulk(e.Username),
			keyspace.Bulk("age-seconds"), keyspace.Double(age),
			keyspace.Bulk("client-info"), keyspace.Bulk(e.ClientInfo),
		)
	}
	c.reply(keyspace.Array(out...))
}

// setRequirePass sets the default user's password, as Redis's
// requirepass does (an empty one: no password): a change of the users,
// which goes through the engine to every member.
func (s *Server) setRequirePass(v string) error {
	rule := "nopass"
	if v != "" {
		rule = "#" + acl.HashPassword([]byte(v))
	}
	req := replication.Request{Cmds: [][][]byte{{[]byte("acl"), []byte("setuser"), []byte(acl.DefaultName), []byte("resetpass"), []byte(rule)}}}
	s.engine.Submit(&req)
	if r := req.Wait(s.ctx); r.IsError() {
		return errors.New(r.Str)
	}
	s.password.Store(&v)
	return nil
}

// aclConfig are the CONFIG parameters of ACL.
var aclConfig = []*setting{
	{name: "aclfile", get: func(s *Server) string { return s.aclFile }},
	{name: "acllog-max-len",
		get: func(s *Server) string { return strconv.Itoa(s.aclLog.Max()) },
		set: func(s *Server, v string) error {
			n, err := parseBounded(v, 0, 1<<31-1)
			if err != nil {
				return err
			}
			s.aclLog.SetMax(int(n))
			return nil
		}},
}

package server

import (
	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

// transaction is the state of a connection between MULTI and EXEC.
type transaction struct {
	cmds   [][][]byte          // queued commands, copied out of the read buffer
	rows   []*keyspace.Command // their table rows
	failed bool                // a command was refused while queuing: EXEC aborts
}

// runsNow reports whether cmd runs at once inside MULTI rather than being
// queued, as in Redis.
func (t *transaction) runsNow(cmd *keyspace.Command) bool {
	switch cmd.Name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return true
	}
	return false
}

// watchedKey is a key WATCHed by the connection: its version, which the engine
// checks at EXEC, and its deadline then (PEXPIRETIME; 0 when it had none).
type watchedKey struct {
	replication.Watch
	deadline int64
}

// queue adds a command to the transaction and replies QUEUED.
func (c *conn) queue(cmd *keyspace.Command, args [][]byte) {
	if subscribing(cmd) {
		// Redis runs (P|S)SUBSCRIBE inside EXEC and writes several replies
		// under one array header, which no client can read; refuse instead.
		c.reject(cmd, keyspace.Error("ERR Command not allowed inside a transaction"))
		return
	}
	size := 0
	for _, a := range args {
		size += len(a)
	}
	// One allocation for the bytes, one for the slice headers.
	data := make([]byte, 0, size)
	copied := make([][]byte, len(args))
	for i, a := range args {
		data = append(data, a...)
		copied[i] = data[len(data)-len(a) : len(data) : len(data)]
	}
	c.multi.cmds = append(c.multi.cmds, copied)
	c.multi.rows = append(c.multi.rows, cmd)
	c.setInfoMulti(len(c.multi.cmds))
	c.reply(queuedReply)
}

var queuedReply = keyspace.Status("QUEUED")

func (c *conn) setInfoMulti(n int) {
	c.info.Lock()
	c.info.multi = n
	c.info.Unlock()
}

func cmdMulti(c *conn, args [][]byte) {
	if c.multi != nil {
		c.reply(keyspace.Error("ERR MULTI calls can not be nested"))
		return
	}
	c.multi = &transaction{}
	c.setInfoMulti(0)
	c.reply(keyspace.OK)
}

func cmdDiscard(c *conn, args [][]byte) {
	if c.multi == nil {
		c.reply(keyspace.Error("ERR DISCARD without MULTI"))
		return
	}
	c.multi = nil
	c.setInfoMulti(-1)
	c.watched = nil
	c.reply(keyspace.OK)
}

func cmdWatch(c *conn, args [][]byte) {
	if c.multi != nil {
		c.reply(keyspace.Error("ERR WATCH inside MULTI is not allowed"))
		return
	}
	var keys []string
	for _, k := range args[1:] {
		if !c.watching(string(k)) {
			keys = append(keys, string(k))
		}
	}
	if len(keys) == 0 {
		c.reply(keyspace.OK)
		return
	}
	s := c.slot()
	s.req.DB = c.db
	s.req.WatchKeys = keys
	s.then = watchDone
	c.submit(s)
}

// watching reports whether key of the current database is watched already:
// Redis keeps the first WATCH of a key.
func (c *conn) watching(key string) bool {
	for _, w := range c.watched {
		if w.DB == c.db && w.Key == key {
			return true
		}
	}
	return false
}

// watchDone records the versions the engine read for WATCH, then reads the
// keys' deadlines: a key that expires before EXEC counts as changed, and its
// version cannot show that. The versions come first, so that a change between
// the two reads is caught by the version.
func watchDone(c *conn, s *slot, r keyspace.Reply) keyspace.Reply {
	if r.Kind != keyspace.KindArray {
		return r
	}
	deadlines := replication.Request{DB: s.req.DB, Multi: true, Cmds: make([][][]byte, len(s.req.WatchKeys))}
	for i, k := range s.req.WatchKeys {
		deadlines.Cmds[i] = [][]byte{[]byte("pexpiretime"), []byte(k)}
	}
	c.srv.engine.Submit(&deadlines)
	d := c.wait(&deadlines)
	if d.Kind != keyspace.KindArray {
		return d
	}
	for i, e := range r.Elems {
		w := watchedKey{Watch: replication.Watch{DB: s.req.DB, Key: s.req.WatchKeys[i], Version: uint64(e.Int)}}
		if dl := d.Elems[i]; dl.Kind == keyspace.KindInt && dl.Int > 0 {
			w.deadline = dl.Int
		}
		c.watched = append(c.watched, w)
	}
	return keyspace.OK
}

func cmdUnwatch(c *conn, args [][]byte) {
	c.watched = nil
	c.reply(keyspace.OK)
}

// cmdExec runs the transaction: its data commands as one engine request (one
// log entry, checked against the WATCHed versions), then its connection
// commands, with the replies in the order the commands were queued.
func cmdExec(c *conn, args [][]byte) {
	t := c.multi
	if t == nil {
		c.reply(keyspace.Error("ERR EXEC without MULTI"))
		return
	}
	c.multi = nil
	c.setInfoMulti(-1)
	if t.failed {
		c.watched = nil
		c.reply(keyspace.Error("EXECABORT Transaction discarded because of previous errors."))
		return
	}
	// The replies before EXEC, WATCH's among them, come first.
	c.drain()
	watched := c.watched
	c.watched = nil

	// A key that expires after WATCH counts as changed, as in Redis 7. The
	// engine's version check cannot see expiry, which changes no version, so
	// it is judged here, before proposing: the entry's time is no earlier.
	now := c.srv.engine.Now()
	for _, w := range watched {
		if w.deadline != 0 && w.deadline <= now {
			c.reply(keyspace.NullArray)
			return
		}
	}

	// The ACL rules are checked again, as Redis checks them when EXEC runs
	// each command: one they no longer allow is answered so and does not
	// run. ACL SETUSER's passwords go to the log hashed, and ACL LOAD reads
	// the ACL file now.
	replies := make([]keyspace.Reply, len(t.cmds))
	answered := make([]bool, len(t.cmds))
	u := c.user.Load().User()
	s := c.slot()
	s.req.DB = c.db
	s.req.Multi = true
	s.req.OverMemory = c.srv.mem.over()
	if !u.Unrestricted() {
		s.req.User = u.Name()
	}
	for i, cmd := range t.rows {
		args := t.cmds[i]
		if !u.Unrestricted() {
			if v := u.Check(cmd, args); v.Reason != acl.Allowed {
				c.logDenied(v.Reason, acl.ContextMulti, v.Object(cmd, args), u.Name())
				replies[i], answered[i] = keyspace.Error(v.ExecError()), true
				continue
			}
		}
		switch cmd.Name {
		case "acl|setuser":
			args = hashPasswords(args)
		case "acl|load":
			load, errReply := c.srv.aclLoadArgs()
			if errReply != nil {
				replies[i], answered[i] = *errReply, true
				continue
			}
			args = load
		}
		if engineCommand(cmd) {
			s.req.Cmds = append(s.req.Cmds, args)
		}
	}
	for _, w := range watched {
		s.req.Watch = append(s.req.Watch, w.Watch)
	}
	c.srv.engine.Submit(&s.req)
	r := c.wait(&s.req)
	c.logScriptDenials(&s.req)
	c.srv.countScriptCalls(&s.req, c.addr)
	c.recycle(s)
	if r.Kind != keyspace.KindArray {
		c.reply(r) // WATCH failed (a null array), or the transaction was refused
		return
	}

	engineReplies := r.Elems
	for i, cmd := range t.rows {
		if answered[i] || !engineCommand(cmd) {
			continue
		}
		replies[i] = engineReplies[0]
		engineReplies = engineReplies[1:]
		// SELECT ran inside the entry; the connection follows it.
		if cmd.Name == "select" && replies[i].Kind == keyspace.KindStatus {
			n, _ := keyspace.ParseInt(t.cmds[i][1])
			c.selectDB(int(n))
		}
	}
	for i, cmd := range t.rows {
		if !answered[i] && !engineCommand(cmd) {
			replies[i] = c.runCaptured(t.cmds[i], cmd)
		}
	}
	// Each command counts as a call, and its error as an error reply, as
	// Redis counts them; their time is EXEC's.
	for i, cmd := range t.rows {
		failed := replies[i].Kind == keyspace.KindError
		if failed {
			c.srv.countErrorReply(cmd, replies[i], c.addr)
		}
		c.srv.countInner(cmd, failed)
		if m := &c.srv.hub.monitors; m.n.Load() > 0 && monitored(cmd) {
			m.feed(c.db, c.addr, cmd, t.cmds[i])
		}
	}
	c.reply(keyspace.Array(replies...))
}

// engineCommand reports whether cmd runs in the engine (keyspace commands,
// and scripts, changes of the ACL users and LOCKSERVER, which have no Run of
// their own) rather than in the connection.
func engineCommand(cmd *keyspace.Command) bool {
	return cmd.Run != nil || cmd.Flags&(keyspace.Scripting|keyspace.Users) != 0 || cmd.Layer == keyspace.ClusterLayer
}

// runCaptured runs a connection command and returns its reply instead of
// writing it.
func (c *conn) runCaptured(args [][]byte, cmd *keyspace.Command) keyspace.Reply {
	var got []keyspace.Reply
	c.capture = &got
	handlerOf(cmd)(c, args)
	c.capture = nil
	if len(got) == 0 {
		return keyspace.Status("OK")
	}
	return got[0]
}

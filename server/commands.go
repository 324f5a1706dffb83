package server

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// handler runs a command of the server's layer (keyspace.ServerLayer) on a
// connection: the executor the server registers for each of its rows of the
// command table. Every other command goes to the engine.
type handler func(c *conn, args [][]byte)

// registerHandlers registers the server's executors of the rows named (a
// subcommand by its full name, "client|id").
func registerHandlers(handlers map[string]handler) {
	for name, h := range handlers {
		keyspace.Register(keyspace.ServerLayer, name, h)
	}
}

// handlerOf returns the executor of cmd, a row of the server's layer.
func handlerOf(cmd *keyspace.Command) handler { return cmd.Executor().(handler) }

func init() {
	registerHandlers(map[string]handler{
		"ping":    cmdPing,
		"echo":    cmdLocal,
		"time":    cmdLocal,
		"select":  cmdSelect,
		"quit":    cmdQuit,
		"reset":   cmdReset,
		"hello":   cmdHello,
		"auth":    cmdAuth,
		"wait":    cmdWait,
		"waitaof": cmdWaitAOF,
		"info":    cmdInfo,

		"multi":   cmdMulti,
		"exec":    cmdExec,
		"discard": cmdDiscard,
		"watch":   cmdWatch,
		"unwatch": cmdUnwatch,

		"subscribe":            func(c *conn, args [][]byte) { subscribe(c, kindChannel, args) },
		"psubscribe":           func(c *conn, args [][]byte) { subscribe(c, kindPattern, args) },
		"ssubscribe":           func(c *conn, args [][]byte) { subscribe(c, kindShard, args) },
		"unsubscribe":          func(c *conn, args [][]byte) { unsubscribe(c, kindChannel, args) },
		"punsubscribe":         func(c *conn, args [][]byte) { unsubscribe(c, kindPattern, args) },
		"sunsubscribe":         func(c *conn, args [][]byte) { unsubscribe(c, kindShard, args) },
		"pubsub|channels":      func(c *conn, args [][]byte) { pubsubChannels(c, false, args) },
		"pubsub|shardchannels": func(c *conn, args [][]byte) { pubsubChannels(c, true, args) },
		"pubsub|numsub":        func(c *conn, args [][]byte) { pubsubNumSub(c, false, args) },
		"pubsub|shardnumsub":   func(c *conn, args [][]byte) { pubsubNumSub(c, true, args) },
		"pubsub|numpat":        cmdPubSubNumPat,
		"pubsub|help": help("PUBSUB",
			"CHANNELS [<pattern>]", "    Return the channels with subscribers on this node, matching <pattern> if given.",
			"NUMPAT", "    Return the number of patterns subscribed to.",
			"NUMSUB [<channel> ...]", "    Return the number of subscribers of each channel, pattern subscriptions excluded.",
			"SHARDCHANNELS [<pattern>]", "    Like CHANNELS, for shard channels (SSUBSCRIBE).",
			"SHARDNUMSUB [<shardchannel> ...]", "    Like NUMSUB, for shard channels."),
		// Redis's lines, though every element is counted, as SAMPLES 0 asks.
		"memory|help": help("MEMORY",
			"DOCTOR", "    Return memory problems reports.",
			"PURGE", "    Attempt to purge dirty pages for reclamation by the allocator.",
			"USAGE <key> [SAMPLES <count>]", "    Return memory in bytes used by <key> and its value. Nested values are",
			"    sampled up to <count> times (default: 5, 0 means sample all)."),
		"memory|purge": cmdMemoryPurge,
		"monitor":      cmdMonitor,
	})
}

// help returns a HELP subcommand listing what a container command offers, in
// Redis's format.
func help(container string, lines ...string) handler {
	all := append([]string{container + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"}, lines...)
	all = append(all, "HELP", "    Prints this help.")
	elems := make([]keyspace.Reply, len(all))
	for i, l := range all {
		elems[i] = keyspace.Status(l)
	}
	reply := keyspace.Array(elems...)
	return func(c *conn, args [][]byte) { c.reply(reply) }
}

// runLocal runs a keyspace command that needs no data (PING, ECHO, SELECT,
// TIME) on this connection's behalf, at the log clock's time.
func (c *conn) runLocal(args [][]byte) keyspace.Reply {
	call := keyspace.Call{DB: c.db, Now: c.srv.engine.Now(), Args: args}
	return keyspace.Lookup(args[0]).Run(&call)
}

func cmdLocal(c *conn, args [][]byte) { c.reply(c.runLocal(args)) }

// PING [message]; on a RESP2 connection in subscribed mode Redis replies
// ["pong", message] instead, which subscribers' keepalives expect.
func cmdPing(c *conn, args [][]byte) {
	if len(args) <= 2 && c.proto.Load() == 2 && c.subscribed() {
		msg := keyspace.Bulk("")
		if len(args) == 2 {
			msg = keyspace.BulkBytes(args[1])
		}
		c.reply(keyspace.Array(keyspace.Bulk("pong"), msg))
		return
	}
	c.reply(c.runLocal(args))
}

func cmdSelect(c *conn, args [][]byte) {
	r := c.runLocal(args)
	if !r.IsError() {
		n, _ := keyspace.ParseInt(args[1])
		c.selectDB(int(n))
	}
	c.reply(r)
}

func (c *conn) selectDB(n int) {
	c.db = n
	c.info.Lock()
	c.info.db = n
	c.info.Unlock()
}

func cmdQuit(c *conn, args [][]byte) {
	c.reply(keyspace.OK)
	c.quit = true
}

// RESET returns the connection to its state at connect time, as Redis's
// clearClientConnectionState does; with a password set, it must
// authenticate again.
func cmdReset(c *conn, args [][]byte) {
	c.multi = nil
	c.watched = nil
	c.srv.hub.unsubscribeAll(c)
	c.proto.Store(2)
	c.setDefaultAuth()
	c.noReply, c.skipOne = false, false
	if c.monitoring {
		c.srv.hub.monitors.remove(c)
		c.monitoring = false
	}
	c.db = 0
	c.info.Lock()
	c.info.db, c.info.name, c.info.multi = 0, "", -1
	c.info.noEvict, c.info.noTouch = false, false
	c.info.Unlock()
	c.reply(keyspace.Status("RESET"))
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
func cmdHello(c *conn, args [][]byte) {
	proto := int(c.proto.Load())
	if len(args) > 1 {
		n, ok := keyspace.ParseInt(args[1])
		if !ok {
			c.reply(keyspace.Error("ERR Protocol version is not an integer or out of range"))
			return
		}
		if n < 2 || n > 3 {
			c.reply(keyspace.Error("NOPROTO unsupported protocol version"))
			return
		}
		proto = int(n)
	}
	var user, pass, name []byte
	for i := 2; i < len(args); i++ {
		switch more := len(args) - 1 - i; {
		case strings.EqualFold(string(args[i]), "auth") && more >= 2:
			user, pass = args[i+1], args[i+2]
			i += 2
		case strings.EqualFold(string(args[i]), "setname") && more >= 1:
			name = args[i+1]
			i++
		default:
			c.reply(keyspace.Error("ERR Syntax error in HELLO option '" + string(args[i]) + "'"))
			return
		}
	}
	if user != nil && !c.authenticate(user, pass) {
		c.reply(errWrongPass)
		return
	}
	if !c.authed {
		c.reply(keyspace.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"))
		return
	}
	if name != nil {
		if r := c.setName(name); r.IsError() {
			c.reply(r)
			return
		}
	}
	c.proto.Store(int32(proto))
	info := c.srv.engine.Info()
	c.reply(keyspace.Map(
		keyspace.Bulk("server"), keyspace.Bulk("redis"),
		keyspace.Bulk("version"), keyspace.Bulk(redisVersion),
		keyspace.Bulk("proto"), keyspace.Int(int64(proto)),
		keyspace.Bulk("id"), keyspace.Int(c.id),
		keyspace.Bulk("mode"), keyspace.Bulk("standalone"),
		keyspace.Bulk("role"), keyspace.Bulk(info.Role),
		keyspace.Bulk("modules"), keyspace.Array(),
	))
}

var errWrongPass = keyspace.Error("WRONGPASS invalid username-password pair or user is disabled.")

// AUTH [username] password
func cmdAuth(c *conn, args [][]byte) {
	switch len(args) {
	case 2:
		if c.srv.acl.Default().User().NoPass() {
			c.reply(keyspace.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"))
			return
		}
		if !c.authenticate([]byte("default"), args[1]) {
			c.reply(errWrongPass)
			return
		}
	case 3:
		if !c.authenticate(args[1], args[2]) {
			c.reply(errWrongPass)
			return
		}
	default:
		c.reply(keyspace.ErrSyntax)
		return
	}
	c.reply(keyspace.OK)
}

// WAIT numreplicas timeout blocks the client, as Redis does, until
// numreplicas other nodes hold every write acknowledged before it, or for
// timeout ms (0: no limit), and replies how many hold them.
func cmdWait(c *conn, args [][]byte) {
	n, ok := keyspace.ParseInt(args[1])
	if !ok {
		c.reply(keyspace.ErrNotInteger)
		return
	}
	timeout, errReply := parseTimeout(args[2])
	if errReply != nil {
		c.reply(*errReply)
		return
	}
	c.reply(c.waitReplicas(n, timeout, func(count int) keyspace.Reply { return keyspace.Int(int64(count)) }))
}

// WAITAOF numlocal numreplicas timeout, as Redis 7.2 answers it without an
// append-only file: numlocal must be 0, and numreplicas is waited for as by
// WAIT (a node applies only what its log holds on disk).
func cmdWaitAOF(c *conn, args [][]byte) {
	local, ok1 := keyspace.ParseInt(args[1])
	replicas, ok2 := keyspace.ParseInt(args[2])
	if !ok1 || !ok2 || local < 0 || replicas < 0 {
		c.reply(keyspace.Error("ERR value is out of range, must be positive"))
		return
	}
	timeout, errReply := parseTimeout(args[3])
	if errReply != nil {
		c.reply(*errReply)
		return
	}
	if local > 0 {
		c.reply(keyspace.Error("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."))
		return
	}
	c.reply(c.waitReplicas(replicas, timeout, func(count int) keyspace.Reply {
		return keyspace.Array(keyspace.Zero, keyspace.Int(int64(count)))
	}))
}

// waitReplicas waits, for WAIT and WAITAOF, until n other nodes hold the
// writes acknowledged to this client, and returns reply's rendering of how
// many hold them. The replies of the commands before it are written first:
// they are acknowledged before the wait, and the client reads them while it
// blocks. Inside EXEC it does not wait, as Redis does not block a
// transaction.
func (c *conn) waitReplicas(n int64, timeout time.Duration, reply func(count int) keyspace.Reply) keyspace.Reply {
	if c.capture != nil {
		n = 0
	} else {
		c.drain()
		if n > 0 {
			c.flush()
		}
	}
	var count int
	var err error
	c.block(func(ctx context.Context) {
		count, err = c.srv.engine.WaitReplicas(ctx, int(n), timeout)
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
	})
	errReply, isReply := errorReply(err)
	switch {
	case err == nil, errors.Is(err, errUnblockTimeout):
		return reply(count)
	case errors.Is(err, errUnblockError):
		return keyspace.Error(err.Error())
	case isReply:
		return errReply
	case errors.Is(err, context.Canceled):
		// The connection ends: killed, or the server shuts down.
		return keyspace.Error("ERR the connection is closing")
	}
	return keyspace.Error("ERR " + err.Error())
}

// errorReply returns the error reply that err, from the engine, carries
// for the client, if it carries one: the engine's own, or another member's.
// The engine's other errors are the server's to word.
func errorReply(err error) (keyspace.Reply, bool) {
	return keyspace.ReplyOf(err)
}

// parseTimeout reads a blocking timeout in milliseconds as Redis's
// getTimeoutFromObjectOrReply does. One too long for a time.Duration is no
// limit: Redis never reaches it either.
func parseTimeout(b []byte) (time.Duration, *keyspace.Reply) {
	n, ok := keyspace.ParseInt(b)
	if !ok {
		r := keyspace.Error("ERR timeout is not an integer or out of range")
		return 0, &r
	}
	if n < 0 {
		r := keyspace.Error("ERR timeout is negative")
		return 0, &r
	}
	if n > math.MaxInt64/int64(time.Millisecond) {
		return 0, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

// redisVersion is the Redis version lockserver presents to clients: the one
// whose behaviour it reproduces.
const redisVersion = "7.0.15"

// cmdMemoryPurge serves MEMORY PURGE as the Go runtime can: a full collection
// that returns the memory it frees to the OS. INFO's used_memory, the live
// heap at the end of the last collection, is then exact: the bench reads it
// after one, rather than a figure as old as the last collection.
func cmdMemoryPurge(c *conn, args [][]byte) {
	c.srv.mem.purge()
	c.reply(keyspace.OK)
}

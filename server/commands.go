package server

import (
	"strings"

	"github.com/lockserver/lockserver/keyspace"
)

// handlers serve the commands of the table that the connection layer owns
// (keyspace.Connection, Transaction and subscribing commands), by table name.
// Every other command goes to the engine.
var handlers map[string]func(c *conn, args [][]byte)

func init() {
	handlers = map[string]func(c *conn, args [][]byte){
		"ping":   cmdPing,
		"echo":   cmdEcho,
		"quit":   cmdQuit,
		"select": cmdSelect,
		"hello":  cmdHello,
		"time":   cmdTime,
	}
}

// runLocal runs a keyspace command that needs no data (PING, ECHO, SELECT, TIME)
// on this connection's behalf.
func (c *conn) runLocal(args [][]byte) keyspace.Reply {
	call := keyspace.Call{DB: c.db, Now: c.srv.cfg.Engine.Now(), Args: args}
	r := keyspace.Lookup(args[0]).Run(&call)
	c.db = call.DB
	return r
}

func cmdPing(c *conn, args [][]byte)   { c.reply(c.runLocal(args)) }
func cmdEcho(c *conn, args [][]byte)   { c.reply(c.runLocal(args)) }
func cmdSelect(c *conn, args [][]byte) { c.reply(c.runLocal(args)) }
func cmdTime(c *conn, args [][]byte)   { c.reply(c.runLocal(args)) }

func cmdQuit(c *conn, args [][]byte) {
	c.reply(keyspace.OK)
	c.quit = true
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
func cmdHello(c *conn, args [][]byte) {
	proto := c.proto
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
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "auth" && i+2 < len(args):
			if !c.checkPassword(args[i+2]) {
				c.reply(keyspace.Error("WRONGPASS invalid username-password pair or user is disabled."))
				return
			}
			i += 2
		case opt == "setname" && i+1 < len(args):
			c.name = string(args[i+1])
			i++
		default:
			c.reply(keyspace.Error("ERR Syntax error in HELLO option '" + string(args[i]) + "'"))
			return
		}
	}
	if !c.authed {
		c.reply(keyspace.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"))
		return
	}
	c.proto = proto
	c.reply(keyspace.Map(
		keyspace.Bulk("server"), keyspace.Bulk("redis"),
		keyspace.Bulk("version"), keyspace.Bulk(RedisVersion),
		keyspace.Bulk("proto"), keyspace.Int(int64(proto)),
		keyspace.Bulk("id"), keyspace.Int(c.id),
		keyspace.Bulk("mode"), keyspace.Bulk("standalone"),
		keyspace.Bulk("role"), keyspace.Bulk("master"),
		keyspace.Bulk("modules"), keyspace.Array(),
	))
}

// checkPassword authenticates the connection if pass is the server's password.
func (c *conn) checkPassword(pass []byte) bool {
	if c.srv.cfg.Password == "" || string(pass) != c.srv.cfg.Password {
		return false
	}
	c.authed = true
	return true
}

// RedisVersion is the Redis version lockserver presents to clients: the one
// whose behaviour it reproduces.
const RedisVersion = "7.0.15"

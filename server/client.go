package server

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
)

// The server runs the CLIENT subcommands.
func init() {
	registerHandlers(map[string]handler{
		"client|id":      func(c *conn, args [][]byte) { c.reply(keyspace.Int(c.id)) },
		"client|getname": cmdClientGetName,
		"client|setname": cmdClientSetName,
		"client|setinfo": cmdClientSetInfo,
		"client|info": func(c *conn, args [][]byte) {
			c.reply(keyspace.Reply{Kind: keyspace.KindVerbatim, Str: c.describe() + "\n"})
		},
		"client|list":     cmdClientList,
		"client|kill":     cmdClientKill,
		"client|no-evict": func(c *conn, args [][]byte) { clientFlag(c, args, func(on bool) { c.info.noEvict = on }) },
		"client|no-touch": func(c *conn, args [][]byte) { clientFlag(c, args, func(on bool) { c.info.noTouch = on }) },
		"client|reply":    cmdClientReply,
		"client|pause": func(c *conn, args [][]byte) {
			c.reply(keyspace.Error("ERR CLIENT PAUSE is not supported by lockserver"))
		},
		"client|unpause": func(c *conn, args [][]byte) { c.reply(keyspace.OK) }, // nothing is ever paused
		"client|tracking": func(c *conn, args [][]byte) {
			c.reply(keyspace.Error("ERR CLIENT TRACKING is not supported by lockserver (no client-side caching)"))
		},
		"client|trackinginfo": func(c *conn, args [][]byte) {
			c.reply(keyspace.Map(
				keyspace.Bulk("flags"), keyspace.Reply{Kind: keyspace.KindSet, Elems: []keyspace.Reply{keyspace.Bulk("off")}},
				keyspace.Bulk("redirect"), keyspace.Int(-1),
				keyspace.Bulk("prefixes"), keyspace.Array()))
		},
		"client|getredir": func(c *conn, args [][]byte) { c.reply(keyspace.Int(-1)) },
		"client|caching": func(c *conn, args [][]byte) {
			c.reply(keyspace.Error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"))
		},
		"client|unblock": cmdClientUnblock,
		"client|help": help("CLIENT",
			"CACHING (YES|NO)", "    Refused: client-side caching is not supported.",
			"GETREDIR", "    Return -1: tracking is never on.",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"KILL <ip:port>", "    Kill connection made from <ip:port>.",
			"KILL <option> <value> [<option> <value> [...]]", "    Kill connections. Options are:",
			"    * ID <client-id>", "    * ADDR (<ip:port>|<unixsocket>:0)", "    * LADDR (<ip:port>|<unixsocket>:0)",
			"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "    * USER <username>",
			"    * SKIPME (YES|NO)", "      Skip killing current connection (default: yes).",
			"LIST [options ...]", "    Return information about client connections. Options:",
			"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "    * ID <client-id> [<client-id> ...]",
			"NO-EVICT (ON|OFF)", "    Accepted; lockserver never evicts clients.",
			"NO-TOUCH (ON|OFF)", "    Accepted; lockserver keeps no access times.",
			"REPLY (ON|OFF|SKIP)", "    Control the replies sent to the current connection.",
			"SETINFO <LIB-NAME|LIB-VER> <value>", "    Record the client library's name or version.",
			"SETNAME <name>", "    Assign the name <name> to the current connection.",
			"UNBLOCK <clientid> [TIMEOUT|ERROR]", "    Unblock the specified client blocked in WAIT.",
			"TRACKING, TRACKINGINFO, PAUSE, UNPAUSE", "    Client-side caching and pausing are not supported."),
	})
}

func cmdClientGetName(c *conn, args [][]byte) {
	c.info.Lock()
	name := c.info.name
	c.info.Unlock()
	if name == "" {
		c.reply(keyspace.Null)
		return
	}
	c.reply(keyspace.Bulk(name))
}

func cmdClientSetName(c *conn, args [][]byte) { c.reply(c.setName(args[2])) }

// validAttr reports whether a client name or library attribute uses only
// printable ASCII without spaces, as Redis requires.
func validAttr(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

// setName names the connection; an empty name clears it.
func (c *conn) setName(name []byte) keyspace.Reply {
	if !validAttr(name) {
		return keyspace.Error("ERR Client names cannot contain spaces, newlines or special characters.")
	}
	c.info.Lock()
	c.info.name = string(name)
	c.info.Unlock()
	return keyspace.OK
}

// CLIENT SETINFO LIB-NAME|LIB-VER value, as Redis 7.2 has it (go-redis and
// redis-py send it on connect).
func cmdClientSetInfo(c *conn, args [][]byte) {
	attr := string(args[2])
	var dst *string
	switch strings.ToLower(attr) {
	case "lib-name":
		dst = &c.info.libName
	case "lib-ver":
		dst = &c.info.libVer
	default:
		c.reply(keyspace.Error("ERR Unrecognized option '" + attr + "'"))
		return
	}
	if !validAttr(args[3]) {
		c.reply(keyspace.Error("ERR " + attr + " cannot contain spaces, newlines or special characters."))
		return
	}
	c.info.Lock()
	*dst = string(args[3])
	c.info.Unlock()
	c.reply(keyspace.OK)
}

// clientFlag serves the ON|OFF subcommands.
func clientFlag(c *conn, args [][]byte, set func(on bool)) {
	switch strings.ToLower(string(args[2])) {
	case "on":
		c.info.Lock()
		set(true)
		c.info.Unlock()
	case "off":
		c.info.Lock()
		set(false)
		c.info.Unlock()
	default:
		c.reply(keyspace.ErrSyntax)
		return
	}
	c.reply(keyspace.OK)
}

// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP are not answered themselves.
func cmdClientReply(c *conn, args [][]byte) {
	switch strings.ToLower(string(args[2])) {
	case "on":
		c.noReply, c.skipOne = false, false
		c.reply(keyspace.OK)
	case "off":
		c.noReply = true
	case "skip":
		if !c.noReply {
			c.skipOne = true
		}
	default:
		c.reply(keyspace.ErrSyntax)
	}
}

// CLIENT UNBLOCK id [TIMEOUT|ERROR] ends the wait of a client blocked in
// WAIT: as if its timeout had passed, or with an UNBLOCKED error.
func cmdClientUnblock(c *conn, args [][]byte) {
	id, ok := keyspace.ParseInt(args[2])
	if !ok {
		c.reply(keyspace.ErrNotInteger)
		return
	}
	cause := errUnblockTimeout
	switch {
	case len(args) == 3, len(args) == 4 && strings.EqualFold(string(args[3]), "timeout"):
	case len(args) == 4 && strings.EqualFold(string(args[3]), "error"):
		cause = errUnblockError
	default:
		c.reply(keyspace.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"))
		return
	}
	unblocked := keyspace.Zero
	c.srv.each(func(o *conn) {
		if end := o.unblock.Load(); o.id == id && end != nil {
			(*end)(cause)
			unblocked = keyspace.Int(1)
		}
	})
	c.reply(unblocked)
}

// The causes with which CLIENT UNBLOCK ends a blocked command's wait.
var (
	errUnblockTimeout = errors.New("unblocked as if timed out")
	errUnblockError   = errors.New("UNBLOCKED client unblocked via CLIENT UNBLOCK")
)

// clientType is a CLIENT LIST / KILL TYPE filter: "normal" or "pubsub"
// (lockserver has no master or replica connections).
func parseClientType(b []byte) (string, *keyspace.Reply) {
	switch t := strings.ToLower(string(b)); t {
	case "normal", "pubsub", "master", "replica", "slave":
		return t, nil
	}
	r := keyspace.Error("ERR Unknown client type '" + string(b) + "'")
	return "", &r
}

func (c *conn) isType(t string) bool {
	switch t {
	case "normal":
		return !c.subscribed()
	case "pubsub":
		return c.subscribed()
	}
	return false
}

// CLIENT LIST [TYPE type] [ID id ...]
func cmdClientList(c *conn, args [][]byte) {
	var typ string
	var ids []int64
	switch {
	case len(args) == 4 && strings.EqualFold(string(args[2]), "type"):
		t, errReply := parseClientType(args[3])
		if errReply != nil {
			c.reply(*errReply)
			return
		}
		typ = t
	case len(args) > 3 && strings.EqualFold(string(args[2]), "id"):
		for _, a := range args[3:] {
			id, ok := keyspace.ParseInt(a)
			if !ok {
				c.reply(keyspace.Error("ERR Invalid client ID"))
				return
			}
			ids = append(ids, id)
		}
	case len(args) != 2:
		c.reply(keyspace.ErrSyntax)
		return
	}
	var conns []*conn
	c.srv.each(func(o *conn) {
		if (typ == "" || o.isType(typ)) && (ids == nil || slices.Contains(ids, o.id)) {
			conns = append(conns, o)
		}
	})
	slices.SortFunc(conns, func(a, b *conn) int { return int(a.id - b.id) })
	var b strings.Builder
	for _, o := range conns {
		b.WriteString(o.describe())
		b.WriteByte('\n')
	}
	c.reply(keyspace.Bulk(b.String()))
}

// CLIENT KILL addr, or CLIENT KILL <filter> <value> ...: the old form replies
// OK, the new one the number of clients killed. The caller is spared unless
// SKIPME no; when it is killed, it is after this reply.
func cmdClientKill(c *conn, args [][]byte) {
	var id int64
	var addr, laddr, typ string
	var user *acl.Slot
	oldForm := len(args) == 3
	skipMe := !oldForm
	if oldForm {
		addr = string(args[2])
	} else {
		if len(args)%2 != 0 {
			c.reply(keyspace.ErrSyntax)
			return
		}
		for i := 2; i < len(args); i += 2 {
			v := args[i+1]
			switch strings.ToLower(string(args[i])) {
			case "id":
				n, ok := keyspace.ParseInt(v)
				if !ok || n <= 0 {
					c.reply(keyspace.Error("ERR client-id should be greater than 0"))
					return
				}
				id = n
			case "type":
				t, errReply := parseClientType(v)
				if errReply != nil {
					c.reply(*errReply)
					return
				}
				typ = t
			case "addr":
				addr = string(v)
			case "laddr":
				laddr = string(v)
			case "user":
				if user = c.srv.acl.Lookup(v); user == nil {
					c.reply(keyspace.Error("ERR No such user '" + string(v) + "'"))
					return
				}
			case "skipme":
				switch strings.ToLower(string(v)) {
				case "yes":
					skipMe = true
				case "no":
					skipMe = false
				default:
					c.reply(keyspace.ErrSyntax)
					return
				}
			default:
				c.reply(keyspace.ErrSyntax)
				return
			}
		}
	}
	var victims []*conn
	c.srv.each(func(o *conn) {
		switch {
		case id != 0 && o.id != id,
			addr != "" && o.addr != addr,
			laddr != "" && o.laddr != laddr,
			typ != "" && !o.isType(typ),
			user != nil && o.user.Load() != user,
			skipMe && o == c:
			return
		}
		victims = append(victims, o)
	})
	for _, o := range victims {
		if o == c {
			c.quit = true // after this reply
		} else {
			o.kill()
		}
	}
	switch {
	case !oldForm:
		c.reply(keyspace.Int(int64(len(victims))))
	case len(victims) == 0:
		c.reply(keyspace.Error("ERR No such client"))
	default:
		c.reply(keyspace.OK)
	}
}

// describe returns the connection's CLIENT LIST line, in Redis 7.0's format
// with Redis 7.2's lib-name and lib-ver at the end. Of the memory figures
// Redis reports per client, qbuf, and obl and omem (output not yet written,
// in and past the reply buffer Redis gives each client) are counted, and
// tot-mem is their sum; the others are 0.
func (c *conn) describe() string {
	now := time.Now()
	c.info.Lock()
	name, libName, libVer, db, multi := c.info.name, c.info.libName, c.info.libVer, c.info.db, c.info.multi
	noEvict, noTouch := c.info.noEvict, c.info.noTouch
	c.info.Unlock()

	flags := ""
	if c.subscribed() {
		flags += "P"
	}
	if multi >= 0 {
		flags += "x"
	}
	if c.unblock.Load() != nil {
		flags += "b"
	}
	if noEvict {
		flags += "e"
	}
	if noTouch {
		flags += "T"
	}
	if flags == "" {
		flags = "N"
	}
	cmd := "NULL"
	if last := c.lastCmd.Load(); last != nil {
		cmd = last.Name
	}
	b := make([]byte, 0, 320)
	b = append(b, "id="...)
	b = strconv.AppendInt(b, c.id, 10)
	b = append(b, " addr="...)
	b = append(b, c.addr...)
	b = append(b, " laddr="...)
	b = append(b, c.laddr...)
	b = append(b, " fd="...)
	b = strconv.AppendInt(b, int64(c.fd()), 10)
	b = append(b, " name="...)
	b = append(b, name...)
	b = append(b, " age="...)
	b = strconv.AppendInt(b, int64(now.Sub(c.created)/time.Second), 10)
	b = append(b, " idle="...)
	b = strconv.AppendInt(b, int64(now.Sub(time.Unix(0, c.lastActive.Load()))/time.Second), 10)
	b = append(b, " flags="...)
	b = append(b, flags...)
	b = append(b, " db="...)
	b = strconv.AppendInt(b, int64(db), 10)
	b = append(b, " sub="...)
	b = strconv.AppendInt(b, int64(c.nChannels.Load()), 10)
	b = append(b, " psub="...)
	b = strconv.AppendInt(b, int64(c.nPatterns.Load()), 10)
	b = append(b, " ssub="...)
	b = strconv.AppendInt(b, int64(c.nShard.Load()), 10)
	b = append(b, " multi="...)
	b = strconv.AppendInt(b, int64(multi), 10)
	b = append(b, " qbuf="...)
	b = strconv.AppendInt(b, c.rd.QueryBuf.Load(), 10)
	b = append(b, " qbuf-free="...)
	b = strconv.AppendInt(b, c.rd.QueryBufFree.Load(), 10)
	c.omu.Lock()
	queued, omem := c.outputQueued(), c.outputUsed()
	c.omu.Unlock()
	b = append(b, " argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl="...)
	b = strconv.AppendUint(b, queued-omem, 10)
	b = append(b, " oll=0 omem="...)
	b = strconv.AppendUint(b, omem, 10)
	b = append(b, " tot-mem="...)
	b = strconv.AppendUint(b, queued+uint64(c.rd.QueryBuf.Load()), 10)
	b = append(b, " events=r cmd="...)
	b = append(b, cmd...)
	b = append(b, " user="...)
	b = append(b, c.user.Load().User().Name()...)
	b = append(b, " redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(c.proto.Load()), 10)
	b = append(b, " lib-name="...)
	b = append(b, libName...)
	b = append(b, " lib-ver="...)
	b = append(b, libVer...)
	return string(b)
}

// fd returns the connection's file descriptor, or -1 for an in-memory one.
func (c *conn) fd() int {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

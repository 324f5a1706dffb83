package logcodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/lockserver/lockserver/internal/wire"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
)

// Request is a request as a follower forwards it to the leader: what the
// leader needs to run it. Its fields are those of the engine's request.
type Request struct {
	DB        int
	Cmds      [][][]byte
	Multi     bool
	Watch     []Watch
	WatchKeys []string // set for a WATCH: the keys whose versions it asks
	User      string
	Relay     RelayTag // zero unless the forwarding node relays the reply
}

// Request flags. A forwarded request carries no OverMemory: the leader's
// server decides it.
const (
	reqMulti = 1 << iota
	reqWatchKeys
	reqRelay // the request's relay tag follows the flags
	reqUser  // the request's User follows the flags (and relay tag)
)

// maxReplyDepth bounds the nesting of a decoded reply, so that a hostile
// payload cannot exhaust the stack.
const maxReplyDepth = 1000

// EncodeRequests returns the encoding of a batch of requests, for forwarding.
func EncodeRequests(reqs []Request) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	for i := range reqs {
		r := &reqs[i]
		b = binary.AppendUvarint(b, uint64(r.DB))
		var flags byte
		if r.Multi {
			flags |= reqMulti
		}
		if r.WatchKeys != nil {
			flags |= reqWatchKeys
		}
		if r.Relay != (RelayTag{}) {
			flags |= reqRelay
		}
		if r.User != "" {
			flags |= reqUser
		}
		b = append(b, flags)
		if flags&reqRelay != 0 {
			b = appendRelayTag(b, r.Relay)
		}
		if flags&reqUser != 0 {
			b = wire.AppendString(b, r.User)
		}
		b = appendCmds(b, r.Cmds)
		b = appendWatches(b, r.Watch)
		if r.WatchKeys != nil {
			b = binary.AppendUvarint(b, uint64(len(r.WatchKeys)))
			for _, k := range r.WatchKeys {
				b = wire.AppendString(b, k)
			}
		}
	}
	return b
}

// DecodeRequests decodes a batch of requests. Their byte strings alias b.
func DecodeRequests(b []byte) ([]Request, error) {
	d := newDecoder(b)
	n := d.Count(3)
	reqs := make([]Request, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		r := Request{DB: d.db()}
		flags := d.Byte()
		r.Multi = flags&reqMulti != 0
		if flags&reqRelay != 0 {
			r.Relay = d.relayTag()
		}
		if flags&reqUser != 0 {
			r.User = d.string()
		}
		r.Cmds = d.cmds()
		r.Watch = d.watches()
		if flags&reqWatchKeys != 0 {
			k := d.Count(1)
			r.WatchKeys = make([]string, 0, k)
			for j := 0; j < k && d.Err() == nil; j++ {
				r.WatchKeys = append(r.WatchKeys, d.string())
			}
		} else if len(r.Cmds) == 0 {
			d.Fail(errors.New("request without commands"))
		}
		reqs = append(reqs, r)
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decode requests: %w", err)
	}
	return reqs, nil
}

// encodeReplies returns the encoding of a batch of replies.
func encodeReplies(replies []keyspace.Reply) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(replies)))
	for i := range replies {
		b = appendReply(b, &replies[i])
	}
	return b
}

// Reply field flags: a reply's encoding holds only the fields it uses, so the
// format carries every Kind, present and future, alike.
const (
	replyInt = 1 << iota
	replyFloat
	replyStr
	replyElems
)

func appendReply(b []byte, r *keyspace.Reply) []byte {
	var flags byte
	if r.Int != 0 {
		flags |= replyInt
	}
	if r.Float != 0 {
		flags |= replyFloat
	}
	if r.Str != "" {
		flags |= replyStr
	}
	if r.Elems != nil {
		flags |= replyElems
	}
	b = append(b, byte(r.Kind), flags)
	if flags&replyInt != 0 {
		b = binary.AppendVarint(b, r.Int)
	}
	if flags&replyFloat != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.Float))
	}
	if flags&replyStr != 0 {
		b = wire.AppendString(b, r.Str)
	}
	if flags&replyElems != 0 {
		b = binary.AppendUvarint(b, uint64(len(r.Elems)))
		for i := range r.Elems {
			b = appendReply(b, &r.Elems[i])
		}
	}
	return b
}

// EncodeForwardReply returns the reply to a forwarded batch: the leader's
// applied index once it had applied the batch, which no entry of the batch
// exceeds, then the replies, then for each reply the commands its scripts
// called, which the forwarding node counts.
func EncodeForwardReply(applied uint64, replies []keyspace.Reply, calls [][]luaexec.ScriptCall) []byte {
	b := binary.AppendUvarint(nil, applied)
	b = append(b, encodeReplies(replies)...)
	for i := range replies {
		b = appendCalls(b, calls[i])
	}
	return b
}

// Call flags.
const callRejected = 1

// appendCalls encodes script calls, each command by its name (a subcommand
// as "container|sub"), "" for an unknown one.
func appendCalls(b []byte, calls []luaexec.ScriptCall) []byte {
	b = binary.AppendUvarint(b, uint64(len(calls)))
	for _, c := range calls {
		name := ""
		if c.Cmd != nil {
			name = c.Cmd.Name
		}
		var flags byte
		if c.Rejected {
			flags |= callRejected
		}
		b = wire.AppendString(b, name)
		b = append(b, flags)
		b = binary.AppendVarint(b, c.Nanos)
		b = wire.AppendString(b, c.Err)
	}
	return b
}

// DecodeForwardReply decodes what EncodeForwardReply encoded.
func DecodeForwardReply(b []byte) (applied uint64, replies []keyspace.Reply, calls [][]luaexec.ScriptCall, err error) {
	applied, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, nil, errors.New("decode forward reply: bad applied index")
	}
	d := newDecoder(b[n:])
	replies = d.replies()
	calls = make([][]luaexec.ScriptCall, len(replies))
	for i := 0; i < len(calls) && d.Err() == nil; i++ {
		calls[i] = d.calls()
	}
	if err := d.Finish(); err != nil {
		return 0, nil, nil, fmt.Errorf("decode forward reply: %w", err)
	}
	return applied, replies, calls, nil
}

// calls decodes what appendCalls encoded. A command this node does not know
// (another version's) is left out.
func (d *decoder) calls() []luaexec.ScriptCall {
	n := d.Count(4)
	if n == 0 {
		return nil
	}
	calls := make([]luaexec.ScriptCall, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		name := d.Bytes()
		flags := d.Byte()
		c := luaexec.ScriptCall{Rejected: flags&callRejected != 0, Nanos: d.Varint(), Err: d.string()}
		if len(name) > 0 {
			if c.Cmd = lookupName(name); c.Cmd == nil {
				continue
			}
		}
		calls = append(calls, c)
	}
	return calls
}

// lookupName finds a command by its full name, "container|sub" for a
// subcommand.
func lookupName(name []byte) *keyspace.Command {
	container, sub, ok := bytes.Cut(name, []byte("|"))
	cmd := keyspace.Lookup(container)
	if cmd == nil || !ok {
		return cmd
	}
	return cmd.LookupSub(sub)
}

// decodeReplies decodes a batch of replies.
func decodeReplies(b []byte) ([]keyspace.Reply, error) {
	d := newDecoder(b)
	replies := d.replies()
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decode replies: %w", err)
	}
	return replies, nil
}

func (d *decoder) replies() []keyspace.Reply {
	n := d.Count(1)
	replies := make([]keyspace.Reply, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		replies[i] = d.reply(0)
	}
	return replies
}

func (d *decoder) reply(depth int) keyspace.Reply {
	if depth > maxReplyDepth {
		d.Fail(errors.New("reply nested too deeply"))
		return keyspace.Reply{}
	}
	r := keyspace.Reply{Kind: keyspace.Kind(d.Byte())}
	flags := d.Byte()
	if flags&^(replyInt|replyFloat|replyStr|replyElems) != 0 {
		d.Fail(fmt.Errorf("bad reply flags %#x", flags))
		return r
	}
	if flags&replyInt != 0 {
		r.Int = d.Varint()
	}
	if flags&replyFloat != 0 {
		r.Float = math.Float64frombits(d.Uint64())
	}
	if flags&replyStr != 0 {
		r.Str = d.string()
	}
	if flags&replyElems != 0 {
		n := d.Count(2)
		if r.Kind == keyspace.KindMap && n%2 != 0 {
			// The RESP writer counts a map's pairs: an odd map would corrupt the stream.
			d.Fail(errors.New("map with an odd number of elements"))
			return r
		}
		r.Elems = make([]keyspace.Reply, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			r.Elems = append(r.Elems, d.reply(depth+1))
		}
	}
	return r
}

// Package logcodec is the binary form of what the members of a cluster write
// to the Raft log and send to each other: log entries, the batches of them
// that one Raft log entry holds, and the requests a follower forwards to the
// leader with the replies it gets back.
//
// The contract: the log on disk holds these encodings, so an encoding once
// written is read the same way by every later version, and every member
// decodes the same bytes to the same values, which keeps the replicas alike. Decoders
// treat their input as hostile: garbage fails with an error, never panics,
// and never allocates much more than its own size. Decoded byte strings
// alias the input, which the caller must not change while it uses them.
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

// Integers are varints, strings and byte strings are a length then the bytes.
// Every count is checked against the bytes left before anything is
// allocated.

// Kind says what a log entry holds.
type Kind byte

const (
	KindCommand   Kind = 1 // an Entry: commands to run
	KindBarrier   Kind = 2 // nothing to run: a new leader's first entry
	KindMemberSet Kind = 3 // set a member's client address
	KindMemberDel Kind = 4 // forget a member
	KindSweep     Kind = 5 // remove expired keys from a range of shards
)

// Entry is one replicated change: a single command, or the queued commands of
// an EXEC. It is what the log holds.
type Entry struct {
	// Time is the log clock's stamp in milliseconds. Apply runs the entry at
	// max(Time, previous entry's time) so that time never goes backwards; 0,
	// no stamp, runs it at the previous entry's time.
	Time int64
	DB   int
	Cmds [][][]byte
	// Multi marks an EXEC: the reply is the array of the commands' replies.
	Multi bool
	// Watch lists the keys WATCHed before an EXEC; if any changed, the EXEC
	// replies a null array and runs nothing.
	Watch []Watch
	// OOM is set when the leader was over maxmemory at proposal: commands
	// flagged DenyOOM inside scripts then fail, on every node alike.
	OOM bool
	// User names the ACL user the entry's scripts run as.
	User string
}

// Watch is a key a connection WATCHed and what it looked like then.
type Watch struct {
	DB      int
	Key     string
	Version uint64 // keyspace.Store.Version at WATCH time
}

// LogEntry is one entry of what a Raft log entry holds. Origin and Seq
// identify the proposal on the node that made it, so that its FSM recognises
// its own entries as it applies them.
type LogEntry struct {
	Kind   Kind
	Origin uint64 // random per process start of the proposing node
	Seq    uint64 // the proposal's number on that node
	Entry  Entry  // KindCommand
	Member string // KindMemberSet, KindMemberDel: the node id
	Addr   string // KindMemberSet: its client address
	// Relay names the follower that forwarded a KindCommand entry's request
	// and answers it with its own reply; zero if none.
	Relay RelayTag
	// Sweep is the range of shards of database Entry.DB that a KindSweep
	// entry sweeps at Entry.Time.
	Sweep SweepRange
}

// SweepRange is Shards shards of a database, from shard From on.
type SweepRange struct{ From, Shards int }

// RelayTag names a relayed request: the forwarding node's origin and its
// number for the request, from 1.
type RelayTag struct{ Origin, Seq uint64 }

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

// Entry flags.
const (
	flagMulti = 1 << iota
	flagOOM
	flagRelay // the entry's Relay follows the flags
	flagUser  // the entry's User follows the flags (and Relay)
)

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

// encodeLogEntry returns the encoding of e.
func encodeLogEntry(e *LogEntry) []byte { return appendLogEntry(make([]byte, 0, e.Size()), e) }

// Size estimates the encoded size of e, to size buffers and batches.
func (e *LogEntry) Size() int {
	n := 32 + CmdsSize(e.Entry.Cmds) + len(e.Member) + len(e.Addr) + len(e.Entry.User)
	for _, w := range e.Entry.Watch {
		n += 16 + len(w.Key)
	}
	return n
}

// appendLogEntry appends the encoding of e to b.
func appendLogEntry(b []byte, e *LogEntry) []byte {
	b = append(b, byte(e.Kind))
	b = binary.LittleEndian.AppendUint64(b, e.Origin)
	b = binary.AppendUvarint(b, e.Seq)
	switch e.Kind {
	case KindCommand:
		x := &e.Entry
		b = binary.AppendVarint(b, x.Time)
		b = binary.AppendUvarint(b, uint64(x.DB))
		var flags byte
		if x.Multi {
			flags |= flagMulti
		}
		if x.OOM {
			flags |= flagOOM
		}
		if e.Relay != (RelayTag{}) {
			flags |= flagRelay
		}
		if x.User != "" {
			flags |= flagUser
		}
		b = append(b, flags)
		if flags&flagRelay != 0 {
			b = appendRelayTag(b, e.Relay)
		}
		if flags&flagUser != 0 {
			b = wire.AppendString(b, x.User)
		}
		b = appendCmds(b, x.Cmds)
		b = appendWatches(b, x.Watch)
	case KindMemberSet:
		b = wire.AppendString(b, e.Member)
		b = wire.AppendString(b, e.Addr)
	case KindMemberDel:
		b = wire.AppendString(b, e.Member)
	case KindSweep:
		b = binary.AppendVarint(b, e.Entry.Time)
		b = binary.AppendUvarint(b, uint64(e.Entry.DB))
		b = binary.AppendUvarint(b, uint64(e.Sweep.From))
		b = binary.AppendUvarint(b, uint64(e.Sweep.Shards))
	}
	return b
}

// CmdsSize estimates the encoded size of commands, to size buffers and batches.
func CmdsSize(cmds [][][]byte) int {
	n := 16
	for _, args := range cmds {
		n += 2
		for _, a := range args {
			n += len(a) + 2
		}
	}
	return n
}

// decodeLogEntry decodes an entry. Its byte strings alias b.
func decodeLogEntry(b []byte) (*LogEntry, error) {
	d := newDecoder(b)
	e := new(LogEntry)
	if err := d.logEntry(e); err != nil {
		return nil, err
	}
	return e, nil
}

// logEntry decodes all that is left of d into e.
func (d *decoder) logEntry(e *LogEntry) error {
	e.Kind = Kind(d.Byte())
	e.Origin = d.Uint64()
	e.Seq = d.Uvarint()
	switch e.Kind {
	case KindCommand:
		e.Entry.Time = d.Varint()
		e.Entry.DB = d.db()
		flags := d.Byte()
		e.Entry.Multi = flags&flagMulti != 0
		e.Entry.OOM = flags&flagOOM != 0
		if flags&flagRelay != 0 {
			e.Relay = d.relayTag()
		}
		if flags&flagUser != 0 {
			e.Entry.User = d.string()
		}
		e.Entry.Cmds = d.cmds()
		e.Entry.Watch = d.watches()
	case KindBarrier:
	case KindMemberSet:
		e.Member = d.string()
		e.Addr = d.string()
	case KindMemberDel:
		e.Member = d.string()
	case KindSweep:
		e.Entry.Time = d.Varint()
		e.Entry.DB = d.db()
		from, shards := d.Uvarint(), d.Uvarint()
		if d.Err() == nil && (from >= keyspace.NumShards || shards == 0 || shards > keyspace.NumShards) {
			d.Fail(fmt.Errorf("sweep of %d shards from %d", shards, from))
		}
		e.Sweep = SweepRange{From: int(from), Shards: int(shards)}
	default:
		d.Fail(fmt.Errorf("unknown entry kind %d", e.Kind))
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("decode log entry: %w", err)
	}
	return nil
}

// A Raft log entry holds a batch of entries, so that the proposals that arrive
// while earlier ones commit go to the log, and to every disk, as one write:
// a count, then each entry's length and encoding.

// EncodeBatch returns a Raft log entry's data for entries, whose sizes add up
// to about size.
func EncodeBatch(entries []*LogEntry, size int) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64*(1+len(entries))+size)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	var scratch []byte
	for _, e := range entries {
		scratch = appendLogEntry(scratch[:0], e)
		b = binary.AppendUvarint(b, uint64(len(scratch)))
		b = append(b, scratch...)
	}
	return b
}

// DecodeBatch decodes the entries of a Raft log entry. Their byte strings
// alias b. Every node decodes every batch, so the entries and their argument
// lists come out of a few shared allocations rather than several each.
func DecodeBatch(b []byte) ([]*LogEntry, error) {
	d := newDecoder(b)
	n := d.Count(1)
	slab := make([]LogEntry, n)
	entries := make([]*LogEntry, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		ed := decoder{Decoder: wire.NewDecoder(d.Bytes()), slabs: d.slabs}
		if err := ed.logEntry(&slab[i]); err != nil {
			d.Fail(fmt.Errorf("entry %d: %w", i, err))
			break
		}
		d.slabs = ed.slabs
		entries = append(entries, &slab[i])
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decode batch: %w", err)
	}
	return entries, nil
}

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

func appendCmds(b []byte, cmds [][][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, args := range cmds {
		b = binary.AppendUvarint(b, uint64(len(args)))
		for _, a := range args {
			b = binary.AppendUvarint(b, uint64(len(a)))
			b = append(b, a...)
		}
	}
	return b
}

func appendRelayTag(b []byte, t RelayTag) []byte {
	b = binary.LittleEndian.AppendUint64(b, t.Origin)
	return binary.AppendUvarint(b, t.Seq)
}

func appendWatches(b []byte, ws []Watch) []byte {
	b = binary.AppendUvarint(b, uint64(len(ws)))
	for _, w := range ws {
		b = binary.AppendUvarint(b, uint64(w.DB))
		b = wire.AppendString(b, w.Key)
		b = binary.AppendUvarint(b, w.Version)
	}
	return b
}

// decoder reads the encodings above, its argument lists from slabs.
type decoder struct {
	wire.Decoder
	slabs
}

func newDecoder(b []byte) decoder { return decoder{Decoder: wire.NewDecoder(b)} }

// slabs hand out the lists of decoded commands and arguments from blocks
// shared by a whole batch.
type slabs struct {
	args [][]byte
	cmds [][][]byte
}

// slabBlock is how many elements a new block holds at least.
const slabBlock = 256

// take returns an empty slice with room for n elements from the free part of
// *block, which it replaces with a new block when too little is left.
func take[T any](block *[]T, n int) []T {
	if cap(*block)-len(*block) < n {
		*block = make([]T, 0, max(n, slabBlock))
	}
	i := len(*block)
	*block = (*block)[:i+n]
	return (*block)[i : i : i+n]
}

func (d *decoder) db() int {
	n := d.Uvarint()
	if n >= keyspace.NumDBs {
		d.Fail(fmt.Errorf("database %d out of range", n))
		return 0
	}
	return int(n)
}

func (d *decoder) string() string { return string(d.Bytes()) }

func (d *decoder) cmds() [][][]byte {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	cmds := take(&d.slabs.cmds, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		k := d.Count(1)
		if k == 0 && d.Err() == nil {
			d.Fail(errors.New("command without a name"))
		}
		args := take(&d.slabs.args, k)
		for j := 0; j < k && d.Err() == nil; j++ {
			args = append(args, d.Bytes())
		}
		cmds = append(cmds, args)
	}
	return cmds
}

func (d *decoder) relayTag() RelayTag {
	return RelayTag{Origin: d.Uint64(), Seq: d.Uvarint()}
}

func (d *decoder) watches() []Watch {
	n := d.Count(3)
	if n == 0 {
		return nil
	}
	ws := make([]Watch, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		ws = append(ws, Watch{DB: d.db(), Key: d.string(), Version: d.Uvarint()})
	}
	return ws
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

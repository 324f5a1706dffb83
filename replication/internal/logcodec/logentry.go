package logcodec

import (
	"encoding/binary"
	"fmt"

	"github.com/lockserver/lockserver/internal/wire"
	"github.com/lockserver/lockserver/keyspace"
)

// Kind says what a log entry holds.
type Kind byte

// The kinds of lockserver 0.1 are 1 to 5. A later kind is written only once
// the cluster version says every voter reads it (see the engine's cluster
// version), and only alone in its Raft log entry: a 0.1 member, which skips
// a Raft log entry it cannot decode, skips nothing else with it.
const (
	KindCommand   Kind = 1 // an Entry: commands to run
	KindBarrier   Kind = 2 // nothing to run: a new leader's first entry
	KindMemberSet Kind = 3 // set a member's client address
	KindMemberDel Kind = 4 // forget a member
	KindSweep     Kind = 5 // remove expired keys from a range of shards
	// KindClusterVersion sets the cluster version (0.2 on).
	KindClusterVersion Kind = 6
)

// Alone reports whether an entry of kind k goes alone in its Raft log
// entry: a kind that lockserver 0.1 does not know (see KindClusterVersion).
func (k Kind) Alone() bool { return k > KindSweep }

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
	// Version is a KindClusterVersion entry's cluster version, MAJOR.MINOR,
	// and Pinned says that an operator set it (a downgrade): the leader
	// raises it no more by itself.
	Version string
	Pinned  bool
}

// SweepRange is Shards shards of a database, from shard From on.
type SweepRange struct{ From, Shards int }

// RelayTag names a relayed request: the forwarding node's origin and its
// number for the request, from 1.
type RelayTag struct{ Origin, Seq uint64 }

// Entry flags.
const (
	flagMulti = 1 << iota
	flagOOM
	flagRelay // the entry's Relay follows the flags
	flagUser  // the entry's User follows the flags (and Relay)
)

// encodeLogEntry returns the encoding of e.
func encodeLogEntry(e *LogEntry) []byte { return appendLogEntry(make([]byte, 0, e.Size()), e) }

// Size estimates the encoded size of e, to size buffers and batches.
func (e *LogEntry) Size() int {
	n := 32 + CmdsSize(e.Entry.Cmds) + len(e.Member) + len(e.Addr) + len(e.Entry.User) + len(e.Version)
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
	case KindClusterVersion:
		b = wire.AppendString(b, e.Version)
		var pinned byte
		if e.Pinned {
			pinned = 1
		}
		b = append(b, pinned)
	}
	return b
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
	case KindClusterVersion:
		e.Version = d.string()
		switch pinned := d.Byte(); pinned {
		case 0, 1:
			e.Pinned = pinned == 1
		default:
			d.Fail(fmt.Errorf("cluster version entry pinned %d", pinned))
		}
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

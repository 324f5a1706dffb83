// Package logcodec is the binary form of what the members of a cluster write
// to the Raft log and send to each other: log entries, the batches of them
// that one Raft log entry holds, and the requests a follower forwards to the
// leader with the replies it gets back.
//
// The contract: the log on disk holds these encodings, so an encoding once
// written is read the same way by every later version, and every member
// decodes the same bytes to the same values, which keeps the replicas alike.
// Decoders treat their input as hostile: garbage fails with an error, never
// panics, and never allocates much more than its own size. Decoded byte
// strings alias the input, which the caller must not change while it uses
// them.
package logcodec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/lockserver/lockserver/internal/wire"
	"github.com/lockserver/lockserver/keyspace"
)

// Integers are varints, strings and byte strings are a length then the bytes.
// Every count is checked against the bytes left before anything is
// allocated.

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

// decoder reads the encodings of this package, its argument lists from slabs.
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

package replication

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication/internal/storage"
)

// A backup is the cluster's state at one applied index, streamed from the
// leader to the operator's machine over the client port:
//
//	LOCKSERVER BACKUP        begin: a barrier, then the state frozen; replies
//	                         id, index, term, cluster, created
//	LOCKSERVER BACKUP <id>   the next piece of the body, up to backupChunk
//	                         bytes, and at the end, with the last piece, the
//	                         SHA-256 of the whole body
//
// The body is a snapshot, as a member writes one. Only the leader serves a
// backup: its barrier makes the state it freezes hold every entry
// committed before the backup began (a follower's might lag). A session
// not asked for its next piece for backupIdle ends, and frees the state.
// SaveBackup (backup_offline.go) is the other end.

const (
	backupChunk = 1 << 20
	backupIdle  = time.Minute
)

// A backupSession is a backup under way: the snapshot written into a pipe
// by a goroutine, read by the session's NEXT calls.
type backupSession struct {
	mu    sync.Mutex // one piece at a time
	pr    *io.PipeReader
	sum   hash.Hash // of the body, written before the pipe
	timer *time.Timer
	buf   []byte
}

// close stops s's idle timer and its writer, which fails with why.
func (s *backupSession) close(why error) {
	s.timer.Stop()
	s.pr.CloseWithError(why)
}

// backups are the sessions under way on this node.
type backups struct {
	mu       sync.Mutex
	sessions map[string]*backupSession
}

func (b *backups) get(id string) *backupSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

func (b *backups) end(id string, s *backupSession, why error) {
	b.mu.Lock()
	if b.sessions[id] == s {
		delete(b.sessions, id)
	}
	b.mu.Unlock()
	s.close(why)
}

// endAll ends every session, as the node closes.
func (b *backups) endAll(why error) {
	b.mu.Lock()
	sessions := b.sessions
	b.sessions = nil
	b.mu.Unlock()
	for _, s := range sessions {
		s.close(why)
	}
}

var errBackupIdle = errors.New("the backup was not read for a minute")

func (r *Raft) serveBackup(req *Request, args [][]byte) {
	if len(args) > 3 {
		req.finish(keyspace.ErrWrongArity("lockserver|backup"))
		return
	}
	go func() {
		if len(args) == 3 {
			req.finish(r.backupNext(string(args[2])))
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, adminTimeout)
		defer cancel()
		reply, err := r.backupBegin(ctx)
		if err != nil {
			reply = keyspace.Error("ERR " + err.Error())
		}
		req.finish(reply)
	}()
}

// backupBegin starts a backup on the leader.
func (r *Raft) backupBegin(ctx context.Context) (keyspace.Reply, error) {
	leader, _ := r.leaderLink()
	if leader != r.opts.NodeID || !r.leading() {
		if leader == "" {
			return keyspace.Reply{}, errors.New("no leader: a backup is taken on the leader, and this member knows none")
		}
		return keyspace.Reply{}, fmt.Errorf("not the leader: a backup is taken on the leader, %s (LOCKSERVER LEADER gives its address)", leader)
	}
	// Every entry committed before the backup began is applied here once
	// the barrier is: the state frozen after it holds them all.
	if err := r.raft.Barrier(time.Until(deadline(ctx))).Error(); err != nil {
		return keyspace.Reply{}, fmt.Errorf("barrier: %w", err)
	}
	if err := r.cannotApply(); err != nil {
		return keyspace.Reply{}, err
	}
	term := r.raft.CurrentTerm()
	r.smMu.Lock()
	snap := r.freeze()
	r.smMu.Unlock()
	if !r.leading() {
		snap.Release()
		return keyspace.Reply{}, errors.New("leadership was lost as the backup began: try again")
	}
	var raw [16]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	pr, pw := io.Pipe()
	s := &backupSession{pr: pr, sum: sha256.New()}
	r.backup.mu.Lock()
	if r.backup.sessions == nil {
		r.backup.sessions = map[string]*backupSession{}
	}
	r.backup.sessions[id] = s
	s.timer = time.AfterFunc(backupIdle, func() { r.backup.end(id, s, errBackupIdle) })
	r.backup.mu.Unlock()
	go func() {
		// Paced as a snapshot is (see raftSnapshot.Persist), so that the
		// leader keeps most of its time for its clients meanwhile.
		err := snap.write(&counter{w: io.MultiWriter(s.sum, pw), pace: new(storage.Pacer).Pause})
		snap.Release()
		pw.CloseWithError(err)
	}()
	r.log.Info("backup began", "event", "backup", "id", id, "index", snap.applied, "term", term)
	return keyspace.Map(
		keyspace.Bulk("id"), keyspace.Bulk(id),
		keyspace.Bulk("index"), keyspace.Bulk(strconv.FormatUint(snap.applied, 10)),
		keyspace.Bulk("term"), keyspace.Bulk(strconv.FormatUint(term, 10)),
		keyspace.Bulk("cluster"), keyspace.Bulk(r.cluster.String()),
		keyspace.Bulk("created"), keyspace.Bulk(strconv.FormatInt(time.Now().UnixNano(), 10)),
	), nil
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// backupNext replies the next piece of backup id: [piece, nil], or at the
// end [last piece, SHA-256 of the body].
func (r *Raft) backupNext(id string) keyspace.Reply {
	s := r.backup.get(id)
	if s == nil {
		return keyspace.Error("ERR no backup " + strconv.Quote(id) + " under way here: it ended, went idle, or began on another member")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer.Reset(backupIdle)
	if s.buf == nil {
		s.buf = make([]byte, backupChunk)
	}
	n, err := io.ReadFull(s.pr, s.buf)
	switch {
	case err == nil:
		return keyspace.Array(keyspace.BulkBytes(s.buf[:n]), keyspace.Null)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		r.backup.end(id, s, io.EOF)
		return keyspace.Array(keyspace.BulkBytes(s.buf[:n]), keyspace.Bulk(hex.EncodeToString(s.sum.Sum(nil))))
	default:
		r.backup.end(id, s, err)
		return keyspace.Error("ERR the backup failed: " + err.Error())
	}
}

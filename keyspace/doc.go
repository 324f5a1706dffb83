// Package keyspace is lockserver's data store and its command table.
//
// The store is 16 numbered databases of strings, hashes, lists, sets and
// sorted sets with per-key expiry. Store.Exec runs every data command;
// Store.Freeze, Frozen.WriteSnapshot and Store.ReadSnapshot save and restore
// it; Store.Expired and Store.Sweep find and reclaim expired keys.
//
// The store is pure and deterministic. Every command takes "now" (milliseconds
// since the Unix epoch) from its Call; the package reads no clock, starts no
// goroutine and does no I/O. The same calls in the same order give the same
// replies and the same state, which is what lets Raft replicate commands rather
// than their effects. A Store is not safe for concurrent use: its owner
// (replication's state machine) serialises access.
//
// The command table (Lookup, Commands) has a row for every command the
// server knows, whichever layer runs it: its arity, flags and key positions,
// its ACL categories and key specifications as Redis 7.0's COMMAND reports
// them, and the Layer that runs it. The keyspace runs its rows with their
// Run; every other layer registers the executors of its rows (Register)
// from its init, and finds them in the row (Command.Executor).
//
// Every layer answers a command with a Reply. An error reply is a Reply of
// KindError, and Reply.Err carries one through a Go error return.
package keyspace

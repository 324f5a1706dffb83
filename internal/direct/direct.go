// Package direct holds the errors that a direct call of an embedded server
// (lockserver.Server.Do) returns beside error replies. The root package
// returns them and the lock package recognizes them, without importing the
// server and what it runs on (Raft, storage, Lua).
package direct

import "errors"

// ErrNil is a null reply: a missing key, a failed SET NX.
var ErrNil = errors.New("lockserver: nil")

// ErrClosed is a call on a server that is closing or closed.
var ErrClosed = errors.New("lockserver: server closed")

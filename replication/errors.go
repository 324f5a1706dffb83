package replication

import "github.com/lockserver/lockserver/keyspace"

// Error replies of the Raft engine. Clients retry CLUSTERDOWN and TRYAGAIN on
// their own (go-redis does), so those mean that nothing was written. UNKNOWN
// means that the command may or may not have taken effect, and no client
// retries it by itself: retrying a command that is not idempotent (the HINCRBY
// of a re-entrant lock) could apply it twice, so check first.
const (
	errClusterDown  = "CLUSTERDOWN no leader is reachable; nothing was written"
	errTryAgain     = "TRYAGAIN leadership changed before the command ran; nothing was written"
	errUnknownLost  = "UNKNOWN leadership was lost after the command was proposed; it may or may not have taken effect"
	errUnknownClose = "UNKNOWN the node shut down while the command was in flight; it may or may not have taken effect"
	errClosed       = "ERR the node is shutting down; nothing was written"
)

// replyErr is the error that carries the error reply text through Go's error
// returns, for the server to give the client (see keyspace.ReplyOf).
func replyErr(text string) error { return keyspace.Error(text).Err() }

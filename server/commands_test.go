package server

import (
	"testing"

	"github.com/lockserver/lockserver/keyspace"
)

// TestEveryCommandHasOneExecutor checks the command table once every layer
// linked here has registered its executors: each row that runs (a command
// without subcommands, a subcommand, or a container that runs alone, as
// COMMAND does) has exactly one executor, from the layer the row names: the
// keyspace's Run, or what its layer registered. A container that needs a
// subcommand runs none of its own.
//
// The scripting engine (luaexec) and the replicated engine (replication,
// the cluster's and the users' rows) register theirs from their own
// packages, which the server imports.
func TestEveryCommandHasOneExecutor(t *testing.T) {
	for _, cmd := range allNames() {
		if cmd.Subcommands != nil && !cmd.CheckArity(1) {
			if cmd.Executor() != nil {
				t.Errorf("%s needs a subcommand, yet has an executor", cmd.Name)
			}
			continue
		}
		// Run on another layer's row is no executor: it is the keyspace's
		// part of the command, which scripts may call.
		if cmd.Run != nil && cmd.Layer != keyspace.KeyspaceLayer && cmd.Has(keyspace.NoScript) {
			t.Errorf("%s, the %s layer's, has a Run that no script may call", cmd.Name, cmd.Layer)
		}
		switch {
		case cmd.Layer == keyspace.KeyspaceLayer:
			if cmd.Run == nil || cmd.Executor() != nil {
				t.Errorf("%s, the keyspace's: Run %v, registered executor %v; want a Run alone", cmd.Name, cmd.Run != nil, cmd.Executor())
			}
		case cmd.Layer == keyspace.ServerLayer:
			if _, ok := cmd.Executor().(handler); !ok {
				t.Errorf("%s, the server's, has no handler: %v", cmd.Name, cmd.Executor())
			}
		default:
			if cmd.Executor() == nil {
				t.Errorf("%s, the %s layer's, has no executor", cmd.Name, cmd.Layer)
			}
		}
	}
}

// TestRegisteringTwicePanics: a layer that registers an executor for a row
// that has one already stops the program as it starts, naming the row.
func TestRegisteringTwicePanics(t *testing.T) {
	defer func() {
		if got, want := recover(), "keyspace: server registers a second executor for client|id"; got != want {
			t.Errorf("registering CLIENT ID again: panic %v, want %q", got, want)
		}
	}()
	registerHandlers(map[string]handler{"client|id": cmdQuit})
}

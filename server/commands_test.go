package server

import (
	"slices"
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
// The scripting engine (luaexec) and the replicated engine (replication)
// register theirs from their own packages; until they do, their rows are
// checked to be the ones they claim.
func TestEveryCommandHasOneExecutor(t *testing.T) {
	unregistered := map[keyspace.Layer][]string{
		keyspace.ScriptingLayer: {"eval", "eval_ro", "evalsha", "evalsha_ro",
			"script|debug", "script|exists", "script|flush", "script|help", "script|kill", "script|load"},
		keyspace.ClusterLayer: {"lockserver|acked", "lockserver|applied", "lockserver|forward", "lockserver|help",
			"lockserver|join", "lockserver|leader", "lockserver|members", "lockserver|register",
			"lockserver|remove", "lockserver|snapshot", "lockserver|status"},
		keyspace.UsersLayer: {"acl|deluser"},
	}
	claimed := map[keyspace.Layer][]string{}
	for _, cmd := range allNames() {
		if cmd.Subcommands != nil && !cmd.CheckArity(1) {
			if cmd.Executor() != nil {
				t.Errorf("%s needs a subcommand, yet has an executor", cmd.Name)
			}
			continue
		}
		// Run on another layer's row is no executor: it is the keyspace's
		// part of the command, which scripts may call or a standalone node
		// answers LOCKSERVER with.
		if cmd.Run != nil && cmd.Layer != keyspace.KeyspaceLayer && cmd.Has(keyspace.NoScript) && cmd.Layer != keyspace.ClusterLayer {
			t.Errorf("%s, the %s layer's, has a Run that no script may call", cmd.Name, cmd.Layer)
		}
		switch _, later := unregistered[cmd.Layer]; {
		case later:
			claimed[cmd.Layer] = append(claimed[cmd.Layer], cmd.Name)
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
	for layer, want := range unregistered {
		if got := claimed[layer]; !slices.Equal(got, want) {
			t.Errorf("the %s layer claims %q, want %q", layer, got, want)
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

package keyspace

import (
	"strings"
	"testing"
)

// TestRegisterPanicsNamingTheRow: a layer's registration that does not fit
// the table (a row twice, a row that does not exist, another layer's row, a
// keyspace row, no executor) panics with the row's name, so that a wrong
// table stops the program as it starts; a fitting one gives the row its
// executor.
func TestRegisterPanicsNamingTheRow(t *testing.T) {
	tab := commandTable{}
	tab.add(runBy(ServerLayer, &Command{Name: "client", Arity: -2, Subcommands: subcommands("client",
		&Command{Name: "id", Arity: 2},
		&Command{Name: "info", Arity: 2},
	)})...)
	tab.add(&Command{Name: "get", Arity: 2, Run: func(*Call) Reply { return Null }})

	tab.register(ServerLayer, "client|id", "the server's")
	if got := tab["client"].Subcommands["id"].Executor(); got != "the server's" {
		t.Fatalf("CLIENT ID's executor is %v", got)
	}
	for _, c := range []struct {
		layer    Layer
		name     string
		executor any
		want     string
	}{
		{ServerLayer, "client|id", "again", "keyspace: server registers a second executor for client|id"},
		{ServerLayer, "nosuch", "x", "keyspace: server registers an executor for nosuch, which is no command"},
		{ServerLayer, "client|nosuch", "x", "keyspace: server registers an executor for client|nosuch, which is no command"},
		{ScriptingLayer, "client|info", "x", "keyspace: scripting registers an executor for client|info, which the server layer runs"},
		{KeyspaceLayer, "get", "x", "keyspace: an executor registered for get, which runs with its Run"},
		{ServerLayer, "client|info", nil, "keyspace: server registers no executor for client|info"},
	} {
		func() {
			defer func() {
				if got := recover(); got != c.want {
					t.Errorf("Register(%s, %q): panic %v, want %q", c.layer, c.name, got, c.want)
				}
			}()
			tab.register(c.layer, c.name, c.executor)
		}()
	}
	if got := tab["client"].Subcommands["info"].Executor(); got != nil {
		t.Errorf("CLIENT INFO's executor is %v after refused registrations", got)
	}
}

// Lookup's index finds what the table holds, in any case, and nothing else.
func TestLookupAgreesWithTheTable(t *testing.T) {
	for name, cmd := range table {
		for _, n := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			if got := Lookup([]byte(n)); got != cmd {
				t.Errorf("Lookup(%q) = %v, want the table's %q", n, got, name)
			}
		}
		for _, n := range []string{name + "x", name[:len(name)-1], "x" + name, name + strings.Repeat("a", maxNameLen)} {
			if got := Lookup([]byte(n)); got != table[strings.ToLower(n)] {
				t.Errorf("Lookup(%q) = %v, want %v", n, got, table[n])
			}
		}
	}
}

package replication

import (
	"bytes"
	"strings"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
)

// The ACL users are replicated state: ACL SETUSER, DELUSER and LOAD are log
// entries, which every member's state machine applies to its users in log
// order, and snapshots hold them. The commands scripts call are checked
// against the script's user as the state machine runs them, so that a
// script is refused at the same command on every member.
//
// In the log, ACL LOAD is the users it loads ("acl load <users>", which no
// client can send: ACL LOAD takes no argument), read from the ACL file by
// the node the client asked. A new cluster's first leader seeds the users
// the same way, marked as a seed: with the users its configuration gave it
// (requirepass, the ACL file). Only the first seed in the log takes effect;
// until it, every member enforces the users its own configuration gave it.

// LoadUsersCommand returns the command that replaces every user with users,
// as ACL LOAD does, or, as a seed, gives a cluster its first users.
func LoadUsersCommand(users []*acl.User, seed bool) [][]byte {
	return [][]byte{[]byte("acl"), []byte("load"), acl.EncodeUsers(users, seed)}
}

// A usersExecutor applies a change of the users. The state machine
// registers one for the row of the command table's users layer
// (keyspace.UsersLayer), ACL DELUSER, which a client's request carries to
// the log as it is. ACL SETUSER and LOAD are the server's rows: the log
// holds what the server resolves them to (passwords hashed, the file read),
// which the same executor applies (see isACL).
type usersExecutor func(sm *stateMachine, args [][]byte) keyspace.Reply

func init() {
	keyspace.Register(keyspace.UsersLayer, "acl|deluser", usersExecutor((*stateMachine).execACL))
}

// isACL reports whether args is an ACL command, which in the engine is one
// that changes the users.
func isACL(args [][]byte) bool {
	return len(args[0]) == 3 && bytes.EqualFold(args[0], []byte("acl"))
}

// prepareACL checks a change of the users before it is proposed.
func (sm *stateMachine) prepareACL(args [][]byte) *keyspace.Reply {
	if r, ok := sm.aclArity(args); !ok {
		return &r
	}
	var err error
	switch strings.ToLower(string(args[1])) {
	case "setuser":
		err = sm.users.CheckSetUser(args[2], args[3:])
	case "deluser":
		for _, n := range args[2:] {
			if string(n) == acl.DefaultName {
				err = acl.ErrDeleteDefault
			}
		}
	case "load":
		_, _, err = acl.Decode(args[2])
	}
	if err != nil {
		r := keyspace.Error("ERR " + err.Error())
		return &r
	}
	return nil
}

// aclArity checks the subcommand and the number of arguments of a change of
// the users.
func (sm *stateMachine) aclArity(args [][]byte) (keyspace.Reply, bool) {
	if len(args) < 2 {
		return keyspace.ErrWrongArity("acl"), false
	}
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "setuser" && len(args) >= 3, sub == "deluser" && len(args) >= 3, sub == "load" && len(args) == 3:
		return keyspace.Reply{}, true
	case sub == "setuser", sub == "deluser", sub == "load":
		return keyspace.ErrWrongArity("acl|" + sub), false
	}
	return keyspace.ErrUnknownSubcommand(args), false
}

// execACL applies a change of the users.
func (sm *stateMachine) execACL(args [][]byte) keyspace.Reply {
	if r, ok := sm.aclArity(args); !ok {
		return r
	}
	switch strings.ToLower(string(args[1])) {
	case "setuser":
		if err := sm.users.SetUser(args[2], args[3:]); err != nil {
			return keyspace.Error("ERR " + err.Error())
		}
	case "deluser":
		n, err := sm.users.DelUsers(args[2:])
		if err != nil {
			return keyspace.Error("ERR " + err.Error())
		}
		return keyspace.Int(int64(n))
	case "load":
		users, seed, err := acl.Decode(args[2])
		switch {
		case err != nil:
			return keyspace.Error("ERR " + err.Error())
		case !seed:
			sm.users.Load(users, false)
		case !sm.users.Seeded():
			// A seed keeps the slots of the users already there: nobody
			// authenticated as one of them is cut off.
			sm.users.Replace(users, true)
		}
	}
	return keyspace.OK
}

// userFor returns the user a request's scripts run as: nil, allowed
// everything, for no name; a user deleted since has no permissions left.
func (sm *stateMachine) userFor(name string) *acl.User {
	if name == "" {
		return nil
	}
	if s := sm.users.Lookup([]byte(name)); s != nil {
		return s.User()
	}
	u, _ := acl.SetUser(nil, name, nil)
	return u
}

// takeDenials returns what scripts were refused since the last call, for the
// request of this node's client that is being answered.
func (sm *stateMachine) takeDenials() []acl.Denial { return sm.lua.Denials() }

// useRestoredUsers makes the users the snapshot this state machine was read
// from held the users enforced, once it replaces the state machine in use.
func (sm *stateMachine) useRestoredUsers() {
	if sm.restoredUsers != nil {
		sm.users.Replace(sm.restoredUsers, true)
		sm.restoredUsers = nil
	}
}

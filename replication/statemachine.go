package replication

import (
	"sync/atomic"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/luaexec"
	"github.com/lockserver/lockserver/replication/internal/logcodec"
)

// Watch is a key a connection WATCHed and what it looked like then.
type Watch = logcodec.Watch

// stateMachine is the deterministic core that every node runs: the keyspace,
// the script engine and the time of the last applied entry.
//
// apply is the only code that mutates state. It is deterministic: the same
// entries in the same order give the same state and the same replies on every
// node, on replay and after a restore. It must not be called concurrently with
// itself or with read; the engines serialise them.
type stateMachine struct {
	store *keyspace.Store
	lua   *luaexec.Engine
	// users are the ACL users, which entries change; they outlive a restore
	// (see restoredUsers).
	users *acl.Registry
	// restoredUsers, in a state machine read from a snapshot, are the
	// snapshot's users, seeded ones, which replace users when the state
	// machine is put in use; nil if it held none to apply.
	restoredUsers []*acl.User
	last          int64  // time of the last applied entry, ms
	seed          uint64 // the seed of the last applied entry
	// expired counts the keys sweep reclaimed (INFO's expired_keys).
	expired int64
	// cluster is the cluster version the log has recorded (see version.go),
	// which a cluster member's (versioned) state machine goes by.
	cluster   clusterVersion
	versioned bool
	// version is cluster's version, for knows, which Prepare calls beside
	// apply (setCluster keeps it).
	version atomic.Pointer[buildinfo.Release]
	// epoch counts the restores and recoveries the state went through
	// (see backup.go); scripts see it as redis.LOCKSERVER_EPOCH.
	epoch uint64
	// call is the Call of every run: runs never overlap, and a Call escapes
	// into the script engine, so a fresh one would cost an allocation per
	// command.
	call keyspace.Call
}

// newStateMachine returns an empty state machine that enforces users, nil
// meaning the default user alone. A cluster member's (versioned) knows the
// commands of later releases only once its cluster version allows them
// (commandsAdded).
func newStateMachine(opts luaexec.Options, users *acl.Registry, versioned bool) *stateMachine {
	if users == nil {
		users = acl.NewRegistry()
	}
	store := keyspace.New()
	sm := &stateMachine{store: store, users: users, versioned: versioned}
	if versioned {
		opts.Known = sm.knows
	}
	sm.lua = luaexec.New(store, opts)
	sm.setCluster(clusterVersion{})
	return sm
}

// budget01 is lockserver 0.1's default script budget, which 0.2 raised
// (see luaexec's defaultBudget): a script between the two would be stopped
// by a 0.1 member and run to its end by the others.
const budget01 = 2_000_000

// releaseBudget is the release that raised the default script budget.
var releaseBudget = buildinfo.Release{Major: 0, Minor: 2}

// setCluster sets the cluster version, and the default script budget of
// its oldest release.
func (sm *stateMachine) setCluster(v clusterVersion) {
	sm.cluster = v
	version := v.get()
	sm.version.Store(&version)
	if sm.versioned && !v.allows(releaseBudget) {
		sm.lua.SetDefaultBudget(budget01)
	} else {
		sm.lua.SetDefaultBudget(0)
	}
}

// commandsAdded are the commands of the state machine (keyspace and
// scripting) that releases after lockserver 0.1 added, with the release.
// A member of an older release does not know them: it would answer an
// entry holding one (or a script calling one) with an unknown command and
// change nothing, where the others write. So until the cluster version is
// that release's, they are unknown commands on every member alike, to
// clients and scripts, and no entry applies them. TestCommandsAddedSince01
// keeps the list whole.
var commandsAdded = map[string]buildinfo.Release{
	"geoadd": {Major: 0, Minor: 2}, "geodist": {Major: 0, Minor: 2},
	"geohash": {Major: 0, Minor: 2}, "geopos": {Major: 0, Minor: 2},
	"fcall": {Major: 0, Minor: 2}, "fcall_ro": {Major: 0, Minor: 2},
	"function": {Major: 0, Minor: 2},
}

// knows reports whether cmd exists under the cluster version applied so far.
func (sm *stateMachine) knows(cmd *keyspace.Command) bool {
	added, ok := commandsAdded[cmd.Name]
	return !ok || !sm.version.Load().Less(added)
}

// setEpoch sets the state's epoch (see stateMachine.epoch).
func (sm *stateMachine) setEpoch(epoch uint64) {
	sm.epoch = epoch
	sm.lua.SetEpoch(epoch)
}

// newCluster readies the state to be that of a new cluster, restored from
// a backup or recovered from a minority: the next epoch, so that its fencing
// tokens exceed every earlier one, and build's cluster version, which its
// members run.
func (sm *stateMachine) newCluster(build buildinfo.Release) {
	sm.setEpoch(sm.epoch + 1)
	sm.setCluster(clusterVersion{version: build})
}

// lastTime returns the time of the last applied entry.
func (sm *stateMachine) lastTime() int64 { return sm.last }

// apply runs entry e. seed tells the entry apart from every other one of the
// log, the same on every node (its place in the log): scripts seed
// math.random from it. pub receives the messages the entry publishes; pass
// nil when the entry is not applied live (log replay, snapshot restore), so
// that nothing is delivered twice.
func (sm *stateMachine) apply(e *logcodec.Entry, seed uint64, pub keyspace.Publisher) keyspace.Reply {
	if e.Time > sm.last {
		sm.last = e.Time
	}
	sm.seed = seed
	return sm.run(e.DB, e.Cmds, e.Multi, e.Watch, sm.last, seed, pub, e.OOM, e.User, false)
}

// read runs commands that do not mutate state at time now (at least the time
// of the last applied entry). Its scripts draw the numbers of the last
// applied entry's: a read is not replicated, so nothing needs them to differ.
func (sm *stateMachine) read(db int, cmds [][][]byte, multi bool, watch []Watch, now int64) keyspace.Reply {
	return sm.readAs(db, cmds, multi, watch, now, "")
}

// readAs is read for a request whose scripts run as user (Request.User).
func (sm *stateMachine) readAs(db int, cmds [][][]byte, multi bool, watch []Watch, now int64, user string) keyspace.Reply {
	if now < sm.last {
		now = sm.last
	}
	return sm.run(db, cmds, multi, watch, now, sm.seed, nil, false, user, false)
}

// dryRun runs a request whose effect is MayWrite as a read that must change
// nothing (keyspace.Call.Dry): it answers keyspace.WouldWrite, having changed
// nothing, where the request would write.
func (sm *stateMachine) dryRun(req *Request, now int64) keyspace.Reply {
	return sm.run(req.DB, req.Cmds, false, nil, max(now, sm.last), sm.seed, nil, req.OverMemory, req.User, true)
}

// commandSeedShift places a command's position inside an EXEC above the bits
// that entry seeds use, so that every command of every entry has its own seed.
const commandSeedShift = 48

func (sm *stateMachine) run(db int, cmds [][][]byte, multi bool, watch []Watch, now int64, seed uint64, pub keyspace.Publisher, oom bool, user string, dry bool) keyspace.Reply {
	call := &sm.call
	*call = keyspace.Call{Store: sm.store, DB: db, Now: now, Pub: pub, DenyOOM: oom, Seed: seed, Dry: dry}
	defer func() { *call = keyspace.Call{} }() // let go of the arguments
	u := sm.userFor(user)
	if !multi {
		call.Args = cmds[0]
		return sm.exec(call, u)
	}
	for _, w := range watch {
		if sm.store.Version(w.DB, w.Key) != w.Version {
			return keyspace.NullArray
		}
	}
	replies := make([]keyspace.Reply, len(cmds))
	for i, args := range cmds {
		call.Args = args
		call.Seed = seed + uint64(i)<<commandSeedShift
		replies[i] = sm.exec(call, u)
	}
	return keyspace.Array(replies...)
}

// exec runs one command: a change of the users, or a command of the script
// engine, run as u.
func (sm *stateMachine) exec(call *keyspace.Call, u *acl.User) keyspace.Reply {
	if isACL(call.Args) {
		return sm.execACL(call.Args)
	}
	return sm.lua.ExecAs(call, u)
}

// sweep removes the keys expired at now from shards shards of database db,
// from shard from on (see keyspace.Store.Sweep), and returns how many it
// removed. It runs as an entry does, at max(now, the last entry's time),
// and moves the state machine's time there: no later entry runs before it,
// so removing what had expired changes no outcome.
func (sm *stateMachine) sweep(now int64, db, from, shards int) int {
	if now > sm.last {
		sm.last = now
	}
	n := sm.store.Sweep(db, from, shards, sm.last)
	sm.expired += int64(n)
	return n
}

// scripts returns the number of scripts in the script cache.
func (sm *stateMachine) scripts() int { return sm.lua.NumScripts() }

// record makes the state machine keep the commands scripts call from now
// on, or stop keeping them (see luaexec.Engine.Record): the node that
// answers a request's client counts them. It forgets those kept so far.
func (sm *stateMachine) record(on bool) { sm.lua.Record(on) }

// calls returns the commands scripts called since the last record, valid
// until the next one (see Request.Calls).
func (sm *stateMachine) calls() []luaexec.ScriptCall { return sm.lua.Calls() }

// prepare validates req before it is proposed, so that errors a leader can see
// (unknown command, arity, NOSCRIPT, compile errors, OOM) never enter the log,
// and reports what it may do: a transaction that may write goes through the
// log (only a single command runs dry).
func (sm *stateMachine) prepare(req *Request) (effect keyspace.Effect, errReply *keyspace.Reply) {
	for _, args := range req.Cmds {
		cmd := keyspace.Lookup(args[0])
		if cmd == nil {
			r := keyspace.ErrUnknownCommand(args)
			return keyspace.Reads, &r
		}
		if !cmd.CheckArity(len(args)) {
			r := keyspace.ErrWrongArity(cmd.Name)
			return keyspace.Reads, &r
		}
		if sub := cmd.Resolve(args); req.OverMemory && sub != nil && sub.Has(keyspace.DenyOOM) {
			if req.Multi {
				return keyspace.Reads, &errExecOOM
			}
			return keyspace.Reads, &ErrOOM
		}
		e := keyspace.Writes
		if isACL(args) {
			errReply = sm.prepareACL(args)
		} else {
			e, errReply = sm.lua.Prepare(cmd, args)
		}
		if errReply != nil && !req.Multi {
			return keyspace.Reads, errReply
		}
		if e == keyspace.MayWrite && req.Multi {
			e = keyspace.Writes
		}
		effect = max(effect, e)
	}
	return effect, nil
}

// ErrOOM refuses a DenyOOM command while used memory is over maxmemory.
var ErrOOM = keyspace.Error("OOM command not allowed when used memory > 'maxmemory'.")

// errExecOOM is Redis's reply to an EXEC holding a DenyOOM command while over
// maxmemory: the whole transaction is discarded.
var errExecOOM = keyspace.Error("EXECABORT Transaction discarded because of: " + ErrOOM.Str)

// versions returns the current versions of the given keys of database db, for WATCH.
func (sm *stateMachine) versions(db int, keys []string) []Watch {
	ws := make([]Watch, len(keys))
	for i, k := range keys {
		ws[i] = Watch{DB: db, Key: k, Version: sm.store.Version(db, k)}
	}
	return ws
}

// keyCounts returns each database's number of keys and of keys with a deadline.
func (sm *stateMachine) keyCounts() (keys, expires [keyspace.NumDBs]int) {
	for i := range keys {
		keys[i], expires[i] = sm.store.KeyCounts(i)
	}
	return keys, expires
}

// figures fills in what Info reports of the state machine.
func (sm *stateMachine) figures(info *Info) {
	info.Keys, info.Expires = sm.keyCounts()
	info.ExpiredKeys = sm.expired
	info.ScriptsStopped = sm.lua.Stopped()
}

package acl

import (
	"bytes"
	"slices"

	"github.com/lockserver/lockserver/keyspace"
)

// Reason is why a check failed, in Redis's order of precedence: when no
// selector allows a command, the highest reason any gave is reported.
type Reason uint8

// The reasons, Redis's ACL_DENIED_* values.
const (
	Allowed Reason = iota
	DeniedCommand
	DeniedKey
	DeniedAuth
	DeniedChannel
)

// String names the reason as ACL LOG does.
func (r Reason) String() string {
	switch r {
	case DeniedCommand:
		return "command"
	case DeniedKey:
		return "key"
	case DeniedChannel:
		return "channel"
	case DeniedAuth:
		return "auth"
	}
	return "unknown"
}

// Verdict is the result of a check: Allowed, or why not and, for a key or a
// channel, the position of the argument refused.
type Verdict struct {
	Reason Reason
	Pos    int
}

// Check checks whether u may run cmd (a command or subcommand, as the
// server resolves it) with the arguments args, as Redis's
// ACLCheckAllUserCommandPerm does: it may if any selector allows the
// command, its keys and its channels.
func (u *User) Check(cmd *keyspace.Command, args [][]byte) Verdict {
	if u.unrestricted {
		return Verdict{}
	}
	// The keys, found once for every selector that looks at them.
	var buf [4]keyspace.KeyRef
	var keys []keyspace.KeyRef
	if cmd.HasKeys() && slices.ContainsFunc(u.selectors, func(s *selector) bool { return !s.allKeys }) {
		keys = cmd.KeyRefs(args, buf[:0])
	}
	worst, pos := DeniedCommand, 0
	last := 0
	for _, s := range u.selectors {
		r := s.check(cmd, args, keys, &last)
		if r == Allowed {
			return Verdict{}
		}
		if r > worst || r == worst && last > pos {
			worst, pos = r, last
		}
	}
	return Verdict{Reason: worst, Pos: pos}
}

// check is Redis's ACLSelectorCheckCmd, given the command's keys. pos
// receives the position of a key or channel refused.
func (s *selector) check(cmd *keyspace.Command, args [][]byte, keys []keyspace.KeyRef, pos *int) Reason {
	if !s.allCommands && !cmd.Has(keyspace.NoAuth) && !s.commands.has(cmd.ID) {
		if !s.firstArgAllowed(cmd, args) {
			return DeniedCommand
		}
	}
	if !s.allKeys {
		for _, k := range keys {
			// A key past the arguments (SET alone, which only
			// redis.acl_check_cmd can ask about) is refused, as Redis,
			// reading past its argument vector, refuses it.
			if k.Pos >= len(args) || !s.keyAllowed(args[k.Pos], k.Flags) {
				*pos = k.Pos
				return DeniedKey
			}
		}
	}
	if !s.allChannels {
		flags, from, to := cmd.Channels(args)
		if flags&(keyspace.ChannelPublish|keyspace.ChannelSubscribe) != 0 {
			for i := from; i < to; i++ {
				if !channelAllowed(s.channels, args[i], flags&keyspace.ChannelPattern != 0) {
					*pos = i
					return DeniedChannel
				}
			}
		}
	}
	return Allowed
}

// firstArgAllowed reports whether cmd, denied, is allowed with the first
// argument it has (+select|0).
func (s *selector) firstArgAllowed(cmd *keyspace.Command, args [][]byte) bool {
	allowed := s.firstArgs[cmd.ID]
	if len(args) < 2 || allowed == nil {
		return false
	}
	for _, a := range allowed {
		if bytes.EqualFold(args[1], a) {
			return true
		}
	}
	return false
}

// keyAllowed is Redis's ACLSelectorCheckKey: a key is allowed when a pattern
// that grants the access its specification asks for matches it.
func (s *selector) keyAllowed(key []byte, flags keyspace.KeyFlags) bool {
	if s.allKeys {
		return true
	}
	var need uint8
	if flags&keyspace.KeyAccess != 0 {
		need |= permRead
	}
	if flags&(keyspace.KeyInsert|keyspace.KeyDelete|keyspace.KeyUpdate) != 0 {
		need |= permWrite
	}
	for _, p := range s.keys {
		if p.perm&need == need && keyspace.GlobMatchBytes(p.pattern, key) {
			return true
		}
	}
	return false
}

// channelAllowed is Redis's ACLCheckChannelAgainstList: a channel matches a
// pattern of the list; a pattern subscribed to (PSUBSCRIBE) must be one of
// the list, literally.
func channelAllowed(list [][]byte, channel []byte, pattern bool) bool {
	for _, p := range list {
		if pattern && bytes.Equal(p, channel) || !pattern && keyspace.GlobMatchBytes(p, channel) {
			return true
		}
	}
	return false
}

// KeyAllowed reports whether any selector of u grants the access flags ask
// for to key.
func (u *User) KeyAllowed(key []byte, flags keyspace.KeyFlags) bool {
	for _, s := range u.selectors {
		if s.keyAllowed(key, flags) {
			return true
		}
	}
	return false
}

// ChannelAllowed reports whether any selector of u allows the channel, or
// the pattern, to be subscribed to or published to.
func (u *User) ChannelAllowed(channel []byte, pattern bool) bool {
	for _, s := range u.selectors {
		if s.allChannels || channelAllowed(s.channels, channel, pattern) {
			return true
		}
	}
	return false
}

// The texts of refusals.

// Error returns the NOPERM error Redis answers a command refused with.
func (v Verdict) Error(cmd *keyspace.Command) string {
	switch v.Reason {
	case DeniedCommand:
		return "NOPERM this user has no permissions to run the '" + cmd.Name + "' command"
	case DeniedKey:
		return "NOPERM this user has no permissions to access one of the keys used as arguments"
	case DeniedChannel:
		return "NOPERM this user has no permissions to access one of the channels used as arguments"
	}
	return "ERR no permission"
}

// ExecError returns the error Redis answers, inside EXEC, a queued command
// that the ACL rules no longer allow.
func (v Verdict) ExecError() string {
	reason := "no permission"
	switch v.Reason {
	case DeniedCommand:
		reason = "no permission to execute the command or subcommand"
	case DeniedKey:
		reason = "no permission to touch the specified keys"
	case DeniedChannel:
		reason = "no permission to access one of the channels used as arguments"
	}
	return "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: " + reason
}

// ScriptError returns the message a script's redis.call raises for a
// command refused (Redis's getAclErrorMessage after "The user executing the
// script ").
func (v Verdict) ScriptError() string {
	msg := "lacking the permissions for the command"
	switch v.Reason {
	case DeniedCommand:
		msg = "can't run this command or subcommand"
	case DeniedKey:
		msg = "can't access at least one of the keys mentioned in the command arguments"
	case DeniedChannel:
		msg = "can't publish to the channel mentioned in the command"
	}
	return "The user executing the script " + msg
}

// DryRun returns ACL DRYRUN's text for a refusal.
func (v Verdict) DryRun(cmd *keyspace.Command, args [][]byte) string {
	switch v.Reason {
	case DeniedCommand:
		return "This user has no permissions to run the '" + cmd.Name + "' command"
	case DeniedKey:
		return "This user has no permissions to access the '" + v.Object(cmd, args) + "' key"
	}
	return "This user has no permissions to access the '" + v.Object(cmd, args) + "' channel"
}

// Object returns what ACL LOG records of a refusal: the command's name, or
// the key or channel refused.
func (v Verdict) Object(cmd *keyspace.Command, args [][]byte) string {
	switch {
	case v.Reason == DeniedCommand:
		return cmd.Name
	case v.Pos < len(args):
		return string(args[v.Pos])
	}
	return ""
}

// Denial is a command that a script was refused, for the ACL log of the
// node that serves the script's client.
type Denial struct {
	Reason   Reason
	Object   string
	Username string
}

package acl

import (
	"slices"
	"strings"

	"github.com/lockserver/lockserver/keyspace"
)

// Describe returns the user's rules as ACL LIST shows them (after "user
// <name> "), and ACL SAVE writes them: flags, password hashes, the root
// selector, then the other selectors in parentheses. SetUser of them on a new
// user gives the same user.
func (u *User) Describe() string {
	var b strings.Builder
	if u.enabled {
		b.WriteString("on ")
	} else {
		b.WriteString("off ")
	}
	if u.nopass {
		b.WriteString("nopass ")
	}
	switch u.sanitize {
	case sanitizeSkip:
		b.WriteString("skip-sanitize-payload ")
	case sanitizePayload:
		b.WriteString("sanitize-payload ")
	}
	for _, p := range u.passwords {
		b.WriteString("#" + p + " ")
	}
	for _, s := range u.selectors {
		if s.root {
			b.WriteString(s.describe())
		} else {
			b.WriteString(" (" + s.describe() + ")")
		}
	}
	return b.String()
}

// Flags returns the user's flags as ACL GETUSER lists them.
func (u *User) Flags() []string {
	flags := []string{"off"}
	if u.enabled {
		flags[0] = "on"
	}
	if u.nopass {
		flags = append(flags, "nopass")
	}
	switch u.sanitize {
	case sanitizeSkip:
		flags = append(flags, "skip-sanitize-payload")
	case sanitizePayload:
		flags = append(flags, "sanitize-payload")
	}
	return flags
}

// Passwords returns the hashes of the user's passwords.
func (u *User) Passwords() []string { return slices.Clone(u.passwords) }

// SelectorInfo is what ACL GETUSER shows of a selector.
type SelectorInfo struct{ Commands, Keys, Channels string }

// Selectors returns what ACL GETUSER shows of the root selector and of the
// others.
func (u *User) Selectors() (root SelectorInfo, others []SelectorInfo) {
	for _, s := range u.selectors {
		info := SelectorInfo{Commands: s.describeCommands(), Keys: s.describeKeys(), Channels: s.describeChannels()}
		if s.root {
			root = info
		} else {
			others = append(others, info)
		}
	}
	return root, others
}

func (k keyPattern) String() string {
	switch k.perm {
	case permRead:
		return "%R~" + string(k.pattern)
	case permWrite:
		return "%W~" + string(k.pattern)
	}
	return "~" + string(k.pattern)
}

// describeKeys and describeChannels are GETUSER's keys and channels.
func (s *selector) describeKeys() string {
	if s.allKeys {
		return "~*"
	}
	parts := make([]string, len(s.keys))
	for i, k := range s.keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, " ")
}

func (s *selector) describeChannels() string {
	if s.allChannels {
		return "&*"
	}
	parts := make([]string, len(s.channels))
	for i, c := range s.channels {
		parts[i] = "&" + string(c)
	}
	return strings.Join(parts, " ")
}

// describe is a selector as ACL LIST shows it.
func (s *selector) describe() string {
	var b strings.Builder
	if s.allKeys {
		b.WriteString("~* ")
	} else {
		for _, k := range s.keys {
			b.WriteString(k.String() + " ")
		}
	}
	if s.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range s.channels {
			b.WriteString("&" + string(c) + " ")
		}
	}
	b.WriteString(s.describeCommands())
	return b.String()
}

// describeCommands returns the rules that give a selector's command
// permissions, as Redis's ACLDescribeSelectorCommandRules finds them: +@all
// or -@all, then, while one fits more commands than it misses, the category
// that fits best, then single commands and first arguments. lockserver
// lists single commands in name order; Redis in the order of its hash table.
func (s *selector) describeCommands() string {
	additive := !s.commands.has(allBit)
	fake := newSelector(false)
	rules := []string{"+@all"}
	if additive {
		rules[0] = "-@all"
	}
	fake.apply([]byte(rules[0]))
	// temp holds the bits that the rules so far do not explain yet.
	temp := &selector{commands: slices.Clone(s.commands)}
	applied := make([]bool, len(keyspace.CategoryNames()))
	for {
		best, minDiff, maxSame := -1, int(^uint(0)>>1), 0
		for j, name := range keyspace.CategoryNames() {
			if applied[j] {
				continue
			}
			on, off := temp.countCategory(keyspace.CategoryByName(name))
			diff, same := on, off
			if additive {
				diff, same = off, on
			}
			if same > diff && (diff < minDiff || diff == minDiff && same > maxSame) {
				best, minDiff, maxSame = j, diff, same
			}
		}
		if best < 0 {
			break
		}
		cat := keyspace.CategoryNames()[best]
		fake.changeCategory(keyspace.CategoryByName(cat), additive)
		temp.changeCategory(keyspace.CategoryByName(cat), !additive)
		sign := "-@"
		if additive {
			sign = "+@"
		}
		rules = append(rules, sign+cat)
		applied[best] = true
	}
	for _, c := range table.top {
		rules = s.describeCommand(fake, c, rules)
	}
	return strings.Join(rules, " ")
}

// describeCommand adds the rules that make fake's bit for c, and its
// subcommands', the selector's.
func (s *selector) describeCommand(fake *selector, c *command, rules []string) []string {
	user := s.commands.has(c.id)
	if user != fake.commands.has(c.id) {
		sign := "-"
		if user {
			sign = "+"
		}
		rules = append(rules, sign+c.name)
		fake.change(c, user)
	}
	for _, sub := range c.subs {
		rules = s.describeCommand(fake, sub, rules)
	}
	if !user {
		for _, arg := range s.firstArgs[c.id] {
			rules = append(rules, "+"+c.name+"|"+string(arg))
		}
	}
	return rules
}

// countCategory counts the commands and subcommands of a category that the
// selector allows and denies.
func (s *selector) countCategory(cat keyspace.Category) (on, off int) {
	table.each(func(c *command) {
		switch {
		case c.cats&cat == 0:
		case s.commands.has(c.id):
			on++
		default:
			off++
		}
	})
	return on, off
}

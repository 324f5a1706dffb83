package keyspace

import (
	"sort"
	"strconv"
)

// maxIntsetEntries is Redis's set-max-intset-entries: a set of at most this many
// integers is an intset in Redis 7.0, and replies in ascending numeric order.
const maxIntsetEntries = 512

// set is a Redis set. intset tracks whether Redis would hold it as an intset
// (every member an integer, few enough of them): that decides the reply order.
// Like Redis's conversion, losing the intset form is for good.
type set struct {
	m      map[string]struct{}
	intset bool
}

// newSet returns an empty set whose form Redis would choose for a first member
// first, as setTypeCreate does.
func newSet(first []byte) *set {
	_, isInt := ParseInt(first)
	return &set{m: make(map[string]struct{}), intset: isInt}
}

// add inserts member and reports whether it is new.
func (s *set) add(member []byte) bool {
	if _, ok := s.m[string(member)]; ok {
		return false
	}
	if s.intset {
		if _, isInt := ParseInt(member); !isInt || len(s.m)+1 > maxIntsetEntries {
			s.intset = false
		}
	}
	s.m[string(member)] = struct{}{}
	return true
}

func (s *set) has(member []byte) bool {
	_, ok := s.m[string(member)]
	return ok
}

// members returns the members in the order of a reply: ascending numbers for an
// intset, else sorted, so that replies are deterministic.
func (s *set) members() []string {
	out := make([]string, 0, len(s.m))
	for m := range s.m {
		out = append(out, m)
	}
	sortMembers(out, s.intset)
	return out
}

// sortMembers sorts set members numerically when they are all integers (numeric
// says they are), else as strings.
func sortMembers(out []string, numeric bool) {
	if numeric {
		sort.Slice(out, func(i, j int) bool {
			a, _ := strconv.ParseInt(out[i], 10, 64)
			b, _ := strconv.ParseInt(out[j], 10, 64)
			return a < b
		})
		return
	}
	sort.Strings(out)
}

// allIntegers reports whether every member would fit an intset together.
func allIntegers(members []string) bool {
	if len(members) > maxIntsetEntries {
		return false
	}
	for _, m := range members {
		if _, ok := parseIntString(m); !ok {
			return false
		}
	}
	return true
}

func (s *set) clone() *set {
	c := &set{m: make(map[string]struct{}, len(s.m)), intset: s.intset}
	for m := range s.m {
		c.m[m] = struct{}{}
	}
	return c
}

// asSet returns o's set.
func (o *object) asSet() *set { return o.coll.(*set) }

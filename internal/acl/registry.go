package acl

import (
	"bytes"
	"crypto/subtle"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Registry holds the users. In a cluster they are replicated state: only the
// state machine changes them (SetUser, DelUsers, Load, Replace), from one
// goroutine, in log order; anything may read them meanwhile.
type Registry struct {
	mu     sync.RWMutex
	users  map[string]*Slot
	def    *Slot
	seeded bool
	// onChange, when set, learns of every change, after it (see Change).
	onChange atomic.Pointer[func(Change)]
}

// Slot is where a user lives for the connections authenticated as it: ACL
// SETUSER replaces the user in its slot, so that they see the change at
// once; ACL DELUSER empties it.
type Slot struct {
	user atomic.Pointer[User]
}

// User returns the user now in the slot: after its deletion, one that is off
// and may run nothing.
func (s *Slot) User() *User { return s.user.Load() }

func newSlot(u *User) *Slot {
	s := new(Slot)
	s.user.Store(u)
	return s
}

// Change is what a change of the users did to the slots connections hold:
// the users deleted, whose connections Redis closes, and the users changed,
// whose subscribers Redis closes if they lost a channel.
type Change struct {
	Deleted []*Slot
	Updated []Update
}

// Update is a user that changed.
type Update struct {
	Slot     *Slot
	Old, New *User
}

// NewRegistry returns a registry holding users, and the default user as
// Redis starts it unless users has one.
func NewRegistry(users ...*User) *Registry {
	r := &Registry{users: map[string]*Slot{}}
	r.def = newSlot(NewDefault())
	r.users[DefaultName] = r.def
	r.install(users)
	return r
}

// install adds users to an empty registry; the default user goes into its
// slot.
func (r *Registry) install(users []*User) {
	for _, u := range users {
		if u.name == DefaultName {
			r.def.user.Store(u)
		} else {
			r.users[u.name] = newSlot(u)
		}
	}
}

// OnChange sets the function that learns of every change of the users. It
// runs on the goroutine that makes the change, the state machine's: it must
// not wait for a command to run.
func (r *Registry) OnChange(f func(Change)) { r.onChange.Store(&f) }

func (r *Registry) changed(c Change) {
	if f := r.onChange.Load(); f != nil && (len(c.Deleted) > 0 || len(c.Updated) > 0) {
		(*f)(c)
	}
}

// Default returns the default user's slot, which every connection starts
// with and which is never deleted.
func (r *Registry) Default() *Slot { return r.def }

// Lookup returns the slot of the user named name, or nil.
func (r *Registry) Lookup(name []byte) *Slot {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.users[string(name)]
}

// Get returns the user named name, or nil.
func (r *Registry) Get(name []byte) *User {
	if s := r.Lookup(name); s != nil {
		return s.User()
	}
	return nil
}

// Users returns every user, in name order (Redis's).
func (r *Registry) Users() []*User {
	r.mu.RLock()
	defer r.mu.RUnlock()
	users := make([]*User, 0, len(r.users))
	for _, name := range slices.Sorted(maps.Keys(r.users)) {
		users = append(users, r.users[name].User())
	}
	return users
}

// Authenticate checks a user name and password as Redis's
// ACLCheckUserCredentials does and returns the user's slot, or nil: the
// user exists, is on, and needs no password or has this one.
func (r *Registry) Authenticate(name, pass []byte) *Slot {
	s := r.Lookup(name)
	if s == nil {
		return nil
	}
	u := s.User()
	if !u.enabled {
		return nil
	}
	if u.nopass {
		return s
	}
	h := []byte(HashPassword(pass))
	ok := 0
	for _, p := range u.passwords {
		ok |= subtle.ConstantTimeCompare(h, []byte(p))
	}
	if ok == 1 {
		return s
	}
	return nil
}

// Seeded reports whether the users were ever set through the log: a new
// cluster's first leader seeds them from its configuration (see Seed).
func (r *Registry) Seeded() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.seeded
}

// SetUser creates or changes the user named name with the rules ops, all or
// none, as ACL SETUSER does, and returns the error ACL SETUSER answers.
func (r *Registry) SetUser(name []byte, ops [][]byte) error {
	if !ValidName(name) {
		return &MessageError{"Usernames can't contain spaces or null characters"}
	}
	s := r.Lookup(name)
	var old *User
	if s != nil {
		old = s.User()
	}
	u, err := SetUser(old, string(name), ops)
	if err != nil {
		return err
	}
	if s != nil {
		s.user.Store(u)
		r.changed(Change{Updated: []Update{{Slot: s, Old: old, New: u}}})
		return nil
	}
	r.mu.Lock()
	r.users[u.name] = newSlot(u)
	r.mu.Unlock()
	return nil
}

// CheckSetUser reports what SetUser would answer, changing nothing.
func (r *Registry) CheckSetUser(name []byte, ops [][]byte) error {
	if !ValidName(name) {
		return &MessageError{"Usernames can't contain spaces or null characters"}
	}
	_, err := SetUser(r.Get(name), string(name), ops)
	return err
}

// ErrDeleteDefault refuses to delete the default user.
var ErrDeleteDefault = &MessageError{"The 'default' user cannot be removed"}

// DelUsers deletes the users named, as ACL DELUSER does, and returns how
// many there were; it deletes none if one is the default user.
func (r *Registry) DelUsers(names [][]byte) (int, error) {
	for _, n := range names {
		if string(n) == DefaultName {
			return 0, ErrDeleteDefault
		}
	}
	var c Change
	r.mu.Lock()
	for _, n := range names {
		if s := r.users[string(n)]; s != nil {
			delete(r.users, string(n))
			c.Deleted = append(c.Deleted, s)
		}
	}
	r.mu.Unlock()
	for _, s := range c.Deleted {
		s.user.Store(deleted(s.User().name))
	}
	r.changed(c)
	return len(c.Deleted), nil
}

// deleted is what a slot holds once its user is deleted: a user that may
// neither authenticate nor run anything, as Redis leaves a deleted user's
// connections unauthenticated until it closes them.
func deleted(name string) *User {
	u := newUser(name)
	u.finish()
	return u
}

// Load replaces every user with users, as ACL LOAD does: the default user
// keeps its slot, whose connections see its new rules, and every other user
// is deleted, so that its connections are closed, even if users has one of
// the same name. Without a default user in users, the default user is
// Redis's initial one. seed marks the users as set through the log.
func (r *Registry) Load(users []*User, seed bool) {
	var c Change
	r.mu.Lock()
	for name, s := range r.users {
		if name != DefaultName {
			c.Deleted = append(c.Deleted, s)
		}
	}
	old := r.def.User()
	r.users = map[string]*Slot{DefaultName: r.def}
	r.def.user.Store(NewDefault())
	r.install(users)
	r.seeded = r.seeded || seed
	r.mu.Unlock()
	for _, s := range c.Deleted {
		s.user.Store(deleted(s.User().name))
	}
	c.Updated = []Update{{Slot: r.def, Old: old, New: r.def.User()}}
	r.changed(c)
}

// Replace sets the users to a snapshot's: a user of the same name keeps its
// slot, with its new rules; one the snapshot lacks is deleted.
func (r *Registry) Replace(users []*User, seeded bool) {
	var c Change
	r.mu.Lock()
	next := map[string]*User{}
	for _, u := range users {
		next[u.name] = u
	}
	if next[DefaultName] == nil {
		next[DefaultName] = NewDefault()
	}
	for name, s := range r.users {
		if u, ok := next[name]; ok {
			c.Updated = append(c.Updated, Update{Slot: s, Old: s.User(), New: u})
			s.user.Store(u)
			delete(next, name)
		} else {
			delete(r.users, name)
			c.Deleted = append(c.Deleted, s)
		}
	}
	for name, u := range next {
		r.users[name] = newSlot(u)
	}
	r.seeded = seeded
	r.mu.Unlock()
	for _, s := range c.Deleted {
		s.user.Store(deleted(s.User().name))
	}
	r.changed(c)
}

// ChannelsRevoked reports whether a subscriber authenticated as old may
// lose a subscription when its user becomes new, as Redis's
// ACLKillPubsubClientsIfNeeded decides before it looks at the subscribers:
// new allows no channel that old did not.
func ChannelsRevoked(old, new *User) bool {
	var upcoming [][]byte
	for _, s := range new.selectors {
		if s.allChannels {
			return false
		}
		upcoming = append(upcoming, s.channels...)
	}
	for _, s := range old.selectors {
		if s.allChannels {
			return true
		}
		for _, c := range s.channels {
			if !slices.ContainsFunc(upcoming, func(u []byte) bool { return bytes.Equal(u, c) }) {
				return true
			}
		}
	}
	return false
}

// KeepsSubscription reports whether a subscriber authenticated as u may keep
// a subscription to channel (a pattern subscribed to with PSUBSCRIBE when
// pattern is set) once u's channels were revoked: Redis checks it against
// the channels of every selector of u together.
func (u *User) KeepsSubscription(channel []byte, pattern bool) bool {
	for _, s := range u.selectors {
		if s.allChannels {
			return true
		}
	}
	var all [][]byte
	for _, s := range u.selectors {
		all = append(all, s.channels...)
	}
	return channelAllowed(all, channel, pattern)
}

package server

import (
	"slices"
	"sync"

	"github.com/lockserver/lockserver/internal/acl"
	"github.com/lockserver/lockserver/keyspace"
)

// Hub is the pub/sub hub of one node: it delivers published messages to the
// subscribers connected to this node.
//
// The engine calls Publish from inside Apply, on its own goroutine, so Publish
// never waits for a socket: it queues each message on the subscriber's
// connection, whose push writer sends it.
type Hub struct {
	mu       sync.RWMutex
	channels map[string]map[*conn]struct{}
	patterns map[string]*patternSubs
	shards   map[string]map[*conn]struct{}
	// monitors are the connections in MONITOR mode (monitor.go).
	monitors monitors
}

// patternSubs are the subscribers of one pattern, with the pattern's bytes
// kept for matching.
type patternSubs struct {
	pattern []byte
	conns   map[*conn]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{
		channels: make(map[string]map[*conn]struct{}),
		patterns: make(map[string]*patternSubs),
		shards:   make(map[string]map[*conn]struct{}),
	}
}

// Publish delivers message to the subscribers of channel on this node and
// returns how many deliveries it made: a client subscribed to the channel and
// to a matching pattern receives it twice and counts twice, as in Redis.
// Sharded messages (SPUBLISH) go to SSUBSCRIBE subscribers only. The message
// is copied only when someone is to receive it.
func (h *Hub) Publish(channel, message []byte, sharded bool) int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var n int64
	deliver := func(subs map[*conn]struct{}, kind ...string) {
		elems := make([]keyspace.Reply, 0, len(kind)+2)
		for _, k := range kind {
			elems = append(elems, keyspace.Bulk(k))
		}
		elems = append(elems, keyspace.Bulk(string(channel)), keyspace.Bulk(string(message)))
		msg := keyspace.Reply{Kind: keyspace.KindPush, Elems: elems}
		for c := range subs {
			c.deliver(msg)
			n++
		}
	}
	if sharded {
		if subs := h.shards[string(channel)]; len(subs) > 0 {
			deliver(subs, "smessage")
		}
		return n
	}
	if subs := h.channels[string(channel)]; len(subs) > 0 {
		deliver(subs, "message")
	}
	for pattern, ps := range h.patterns {
		if len(ps.conns) > 0 && keyspace.GlobMatch(ps.pattern, string(channel)) {
			deliver(ps.conns, "pmessage", pattern)
		}
	}
	return n
}

// subscription kinds: how a (un)subscribe command names itself in replies, and
// where its subscriptions live.
type subKind struct {
	name, unname string
}

var (
	kindChannel = subKind{"subscribe", "unsubscribe"}
	kindPattern = subKind{"psubscribe", "punsubscribe"}
	kindShard   = subKind{"ssubscribe", "sunsubscribe"}
)

// subscribing reports whether cmd changes the connection's subscriptions.
func subscribing(cmd *keyspace.Command) bool {
	switch cmd.Name {
	case "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe":
		return true
	}
	return false
}

// count returns the subscription count a confirmation reports: channels and
// patterns together, shard channels alone. Call with h.mu held.
func (c *conn) subCount(k subKind) int64 {
	if k == kindShard {
		return int64(len(c.shards))
	}
	return int64(len(c.channels) + len(c.patterns))
}

// subscribe adds c to a channel, pattern or shard channel. Call with h.mu held.
func (h *Hub) subscribe(c *conn, k subKind, name string) {
	switch k {
	case kindPattern:
		if c.patterns == nil {
			c.patterns = make(map[string]struct{})
		}
		if _, ok := c.patterns[name]; ok {
			return
		}
		c.patterns[name] = struct{}{}
		c.nPatterns.Add(1)
		ps := h.patterns[name]
		if ps == nil {
			ps = &patternSubs{pattern: []byte(name), conns: make(map[*conn]struct{})}
			h.patterns[name] = ps
		}
		ps.conns[c] = struct{}{}
	case kindShard:
		addSub(h.shards, &c.shards, &c.nShard, c, name)
	default:
		addSub(h.channels, &c.channels, &c.nChannels, c, name)
	}
}

func addSub(all map[string]map[*conn]struct{}, mine *map[string]struct{}, count interface{ Add(int32) int32 }, c *conn, name string) {
	if *mine == nil {
		*mine = make(map[string]struct{})
	}
	if _, ok := (*mine)[name]; ok {
		return
	}
	(*mine)[name] = struct{}{}
	count.Add(1)
	subs := all[name]
	if subs == nil {
		subs = make(map[*conn]struct{})
		all[name] = subs
	}
	subs[c] = struct{}{}
}

// unsubscribe removes c from a channel, pattern or shard channel. Call with
// h.mu held.
func (h *Hub) unsubscribe(c *conn, k subKind, name string) {
	switch k {
	case kindPattern:
		if _, ok := c.patterns[name]; !ok {
			return
		}
		delete(c.patterns, name)
		c.nPatterns.Add(-1)
		if ps := h.patterns[name]; ps != nil {
			delete(ps.conns, c)
			if len(ps.conns) == 0 {
				delete(h.patterns, name)
			}
		}
	case kindShard:
		removeSub(h.shards, c.shards, &c.nShard, c, name)
	default:
		removeSub(h.channels, c.channels, &c.nChannels, c, name)
	}
}

func removeSub(all map[string]map[*conn]struct{}, mine map[string]struct{}, count interface{ Add(int32) int32 }, c *conn, name string) {
	if _, ok := mine[name]; !ok {
		return
	}
	delete(mine, name)
	count.Add(-1)
	if subs := all[name]; subs != nil {
		delete(subs, c)
		if len(subs) == 0 {
			delete(all, name)
		}
	}
}

// names returns c's subscriptions of kind k, sorted. Call with h.mu held.
func (c *conn) names(k subKind) []string {
	m := c.channels
	switch k {
	case kindPattern:
		m = c.patterns
	case kindShard:
		m = c.shards
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// unsubscribeAll removes every subscription of c, without replies (RESET,
// disconnection).
func (h *Hub) unsubscribeAll(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(c)
}

// drop removes every subscription of c. Call with h.mu held.
func (h *Hub) drop(c *conn) {
	for _, k := range []subKind{kindChannel, kindPattern, kindShard} {
		for _, n := range c.names(k) {
			h.unsubscribe(c, k, n)
		}
	}
}

// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE channel [channel ...]: each subscription
// is confirmed by a [kind, channel, count] push, in order before any message
// on it.
func subscribe(c *conn, k subKind, args [][]byte) {
	// The replies before come first, and the engine must not wait for the
	// hub's lock while this connection waits for the engine.
	c.drain()
	c.silence() // a CLIENT REPLY SKIP is spent on this command, whose pushes go out anyway
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
		go c.pushWriter()
	}
	h := c.srv.hub
	for _, a := range args[1:] {
		name := string(a)
		h.mu.Lock()
		if c.closing.Load() {
			// Killed since its command was checked (its user's channels
			// revoked): it must not subscribe after revoke dropped it.
			h.mu.Unlock()
			return
		}
		h.subscribe(c, k, name)
		c.reply(subReply(k.name, keyspace.Bulk(name), c.subCount(k)))
		h.mu.Unlock()
	}
}

// UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE [channel ...]: without arguments,
// from every subscription of the kind; with none, one confirmation with a
// null channel.
func unsubscribe(c *conn, k subKind, args [][]byte) {
	c.drain()
	c.silence() // as in subscribe
	h := c.srv.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	if len(args) == 1 {
		names = c.names(k)
		if len(names) == 0 {
			c.reply(subReply(k.unname, keyspace.Null, c.subCount(k)))
			return
		}
	}
	for _, n := range names {
		h.unsubscribe(c, k, n)
		c.reply(subReply(k.unname, keyspace.Bulk(n), c.subCount(k)))
	}
}

func subReply(kind string, channel keyspace.Reply, count int64) keyspace.Reply {
	return keyspace.Reply{Kind: keyspace.KindPush, Elems: []keyspace.Reply{keyspace.Bulk(kind), channel, keyspace.Int(count)}}
}

// PUBSUB CHANNELS|SHARDCHANNELS [pattern]
func pubsubChannels(c *conn, shard bool, args [][]byte) {
	if len(args) > 3 {
		c.reply(keyspace.ErrSubcommandSyntax(args))
		return
	}
	h := c.srv.hub
	h.mu.RLock()
	all := h.channels
	if shard {
		all = h.shards
	}
	var names []string
	for name := range all {
		if len(args) == 2 || keyspace.GlobMatch(args[2], name) {
			names = append(names, name)
		}
	}
	h.mu.RUnlock()
	slices.Sort(names)
	c.reply(keyspace.BulkArray(names))
}

// PUBSUB NUMSUB|SHARDNUMSUB [channel ...]: pairs of channel and subscriber
// count, as a flat array in RESP2 and RESP3 alike, as Redis 7.0 replies.
func pubsubNumSub(c *conn, shard bool, args [][]byte) {
	h := c.srv.hub
	h.mu.RLock()
	all := h.channels
	if shard {
		all = h.shards
	}
	elems := make([]keyspace.Reply, 0, 2*(len(args)-2))
	for _, a := range args[2:] {
		elems = append(elems, keyspace.BulkBytes(a), keyspace.Int(int64(len(all[string(a)]))))
	}
	h.mu.RUnlock()
	c.reply(keyspace.Array(elems...))
}

// PUBSUB NUMPAT: the number of distinct patterns subscribed to.
func cmdPubSubNumPat(c *conn, args [][]byte) {
	h := c.srv.hub
	h.mu.RLock()
	n := len(h.patterns)
	h.mu.RUnlock()
	c.reply(keyspace.Int(int64(n)))
}

// counts returns the numbers of channels, patterns and shard channels with
// subscribers, for INFO.
func (h *Hub) counts() (channels, patterns, shards int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.channels), len(h.patterns), len(h.shards)
}

// revoke closes the subscribers authenticated through slot, whose user is
// now u, that are subscribed to a channel, pattern or shard channel u no
// longer allows, as Redis's ACLKillPubsubClientsIfNeeded does. The engine
// calls it as it applies the change, so no message published after the
// change reaches them or counts them: their subscriptions go here, not when
// their connections get round to ending.
func (h *Hub) revoke(slot *acl.Slot, u *acl.User) {
	kill := map[*conn]bool{}
	check := func(subs map[*conn]struct{}, name string, pattern bool) {
		for c := range subs {
			if !kill[c] && c.user.Load() == slot && !u.KeepsSubscription([]byte(name), pattern) {
				kill[c] = true
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, subs := range h.channels {
		check(subs, name, false)
	}
	for name, ps := range h.patterns {
		check(ps.conns, name, true)
	}
	for name, subs := range h.shards {
		check(subs, name, false)
	}
	for c := range kill {
		c.kill()
		h.drop(c)
	}
}

package compat_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/redis/go-redis/v9"
)

func TestDiffPubSubFlow(t *testing.T) {
	p := newPair(t)
	sub, pub := p, p.another()
	sub.Run([][]string{
		{"SUBSCRIBE"},
		{"UNSUBSCRIBE"}, // nothing to leave: a null channel
		{"PUNSUBSCRIBE"},
		{"SUNSUBSCRIBE"},
		{"SUBSCRIBE", "news"},
	})
	sub.Send("SUBSCRIBE", "news", "sport") // news again: confirmed, not counted twice
	sub.Read()
	sub.Read()
	sub.Do("PSUBSCRIBE", "n*s")
	pub.Do("PUBLISH", "news", "hello") // the channel and the pattern: 2 deliveries
	sub.Read()
	sub.Read()
	pub.Do("PUBLISH", "sport", "goal")
	sub.Read()
	pub.Do("PUBLISH", "nobody", "x")
	pub.Do("PUBLISH", "nws", "via the pattern")
	sub.Read()
	pub.Do("PUBSUB", "NUMSUB", "news", "sport", "nobody")
	pub.Do("PUBSUB", "NUMPAT")
	pub.Do("PUBSUB", "CHANNELS", "s*")
	pub.Do("PUBSUB", "CHANNELS", "nothing*")

	// RESP2 subscribed mode allows only (un)subscribing, PING, QUIT and RESET.
	sub.Run([][]string{
		{"GET", "k"},
		{"SET", "k", "v"},
		{"CLIENT", "ID"},
		{"MULTI"},
		{"PUBLISH", "news", "x"},
		{"NOSUCH"},
		{"PING"},
		{"PING", "payload"},
		{"PING", "a", "b"},
	})
	sub.Do("UNSUBSCRIBE", "sport")
	sub.Do("PUNSUBSCRIBE", "n*s")
	sub.Do("UNSUBSCRIBE", "news", "never-subscribed")
	sub.Read()
	sub.Run([][]string{{"PING"}, {"GET", "k"}}) // out of subscribed mode
	pub.Do("PUBLISH", "news", "nobody listens")

	// Unsubscribing from everything confirms each subscription.
	sub.Do("SUBSCRIBE", "only")
	sub.Do("UNSUBSCRIBE")
	sub.Do("PSUBSCRIBE", "p1")
	sub.Do("PUNSUBSCRIBE")
	sub.Do("RESET")
	pub.Do("PUBSUB", "NUMSUB", "only")
}

func TestDiffPubSubResp3(t *testing.T) {
	p := newPair(t)
	sub, pub := p, p.another()
	sub.DoNorm(normID, "HELLO", "3")
	sub.Do("SUBSCRIBE", "ch")
	sub.Do("PSUBSCRIBE", "c?")
	sub.Do("SSUBSCRIBE", "shard")
	// RESP3 clients may run any command while subscribed.
	sub.Run([][]string{{"GET", "k"}, {"SET", "k", "v"}, {"PING"}})
	pub.Do("PUBLISH", "ch", "m1")
	sub.Read()
	sub.Read()
	pub.Do("SPUBLISH", "shard", "m2")
	sub.Read()
	pub.Do("SPUBLISH", "ch", "not a shard channel")
	pub.Do("PUBLISH", "shard", "not a plain channel")
	pub.Do("PUBSUB", "SHARDCHANNELS")
	pub.Do("PUBSUB", "SHARDCHANNELS", "sh*")
	pub.Do("PUBSUB", "SHARDNUMSUB", "shard", "ch")
	pub.Do("PUBSUB", "NUMSUB", "ch")
	// A subscriber that publishes to itself gets the message before the reply.
	sub.Do("PUBLISH", "ch", "to myself")
	sub.Read()
	sub.Read()
	sub.Do("SUNSUBSCRIBE")
	sub.Do("UNSUBSCRIBE", "ch")
	sub.Do("PUNSUBSCRIBE", "c?")
	sub.Run([][]string{
		{"PUBSUB"},
		{"PUBSUB", "FOO"},
		{"PUBSUB", "NUMPAT", "x"},
		{"PUBSUB", "CHANNELS", "a", "b"},
		{"PUBSUB", "NUMSUB"},
		{"PUBSUB", "HELP", "x"},
	})
}

// CLIENT REPLY OFF and SKIP silence replies, but not the confirmations of
// (un)subscriptions, which Redis 7.0 sends as pushes whatever the setting: a
// client waiting for one would hang. A SKIP is spent on the (un)subscribe
// command, not on one of its confirmations.
func TestDiffPubSubReplyOff(t *testing.T) {
	for _, resp3 := range []bool{false, true} {
		p := newPair(t)
		pub := p.another()
		if resp3 {
			p.DoNorm(normID, "HELLO", "3")
		}
		p.Send("CLIENT", "REPLY", "OFF")
		p.Send("SUBSCRIBE", "ch", "ch2")
		p.Read()
		p.Read()
		p.Send("PSUBSCRIBE", "p*")
		p.Read()
		p.Send("SSUBSCRIBE", "sc")
		p.Read()
		pub.Do("PUBLISH", "ch", "hi")
		p.Read()
		p.Send("UNSUBSCRIBE", "ch")
		p.Read()
		p.Send("PUNSUBSCRIBE")
		p.Read()
		p.Send("SUNSUBSCRIBE")
		p.Read()
		if !resp3 {
			continue
		}
		// RESP3 runs any command while subscribed.
		p.Send("CLIENT", "REPLY", "ON")
		p.Read()
		p.Send("CLIENT", "REPLY", "SKIP")
		p.Send("SUBSCRIBE", "z", "y")
		p.Read()
		p.Read()
		p.Do("PING")
		p.Send("CLIENT", "REPLY", "SKIP")
		p.Send("UNSUBSCRIBE", "z")
		p.Read()
		p.Do("PING")
	}
}

func TestDiffPubSubInMulti(t *testing.T) {
	p := newPair(t)
	pub := p.another()
	p.Do("SUBSCRIBE", "c")
	pub.Run([][]string{
		{"MULTI"},
		{"PUBLISH", "c", "in a transaction"},
		{"PUBSUB", "NUMSUB", "c"},
		{"EXEC"},
	})
	p.Read()
}

// TestDiffGlob checks PSUBSCRIBE's pattern matching against Redis's through
// PUBSUB CHANNELS, which matches active channels with the same function.
func TestDiffGlob(t *testing.T) {
	p := newPair(t)
	channels := []string{"", "a", "b", "ab", "abc", "aXc", "a*c", "a?c", "a[c", "a]c", "a\\c", "a-c",
		"hello", "hallo", "hxllo", "hllo", "heeeello", "HELLO", "h.llo", "news.sport", "news.", "-", "]", "^", "x^y"}
	sub := p.another()
	sub.Send(append([]string{"SUBSCRIBE"}, channels...)...)
	for range channels {
		sub.Read()
	}
	matched := 0
	for _, pattern := range []string{
		"*", "", "?", "??", "a*", "*c", "a?c", "a*c", "a\\*c", "a\\?c", "a[*]c", "a[\\]]c", "a[]]c",
		"a[^b]c", "a[^X]c", "a[a-c]c", "a[c-a]c", "h[ae]llo", "h[^e]llo", "h*llo", "h**llo", "h?llo",
		"[", "[a", "a[", "a[b", "[^", "a\\", "\\", "*\\", "news.*", "*.*", "[-]", "[a-]", "[]-]",
		"[^]]", "x[^^]y", "x^y", "HELLO", "hel*", "*l*l*o", "a[\\-]c", "[a-b-c]",
	} {
		want := sortedList(p.redis.Do("PUBSUB", "CHANNELS", pattern))
		got := sortedList(p.ls.Do("PUBSUB", "CHANNELS", pattern))
		matched += len(got)
		if !slices.Equal(got, want) {
			t.Errorf("PUBSUB CHANNELS %q:\n redis-server: %q\n   lockserver: %q", pattern, want, got)
		}
	}
	// The patterns are not all trivially empty: many channels matched.
	if matched < 100 {
		t.Errorf("only %d matches in all: the channels were not subscribed?", matched)
	}
}

func sortedList(reply string) []string {
	if reply == "*0\r\n" {
		return nil
	}
	items := strings.Split(listOf(reply), "\n")
	slices.Sort(items)
	return items
}

// TestGoRedisPubSub drives pub/sub with go-redis over RESP2 and RESP3, as
// Redisson's lock waiters use it: subscribe, then receive what is published.
func TestGoRedisPubSub(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(map[int]string{2: "RESP2", 3: "RESP3"}[proto], func(t *testing.T) {
			s := startLockserver(t, lockserver.Options{})
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: proto})
			defer rdb.Close()

			ps := rdb.Subscribe(ctx, "lock:released")
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil { // the confirmation
				t.Fatal(err)
			}
			if err := ps.PSubscribe(ctx, "lock:*"); err != nil {
				t.Fatal(err)
			}
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := rdb.Publish(ctx, "lock:released", "owner-1").Result()
			if err != nil || n != 2 {
				t.Fatalf("PUBLISH = %d, %v; want 2 deliveries", n, err)
			}
			var got []string
			for len(got) < 2 {
				msg, err := ps.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, msg.Pattern+"|"+msg.Channel+"|"+msg.Payload)
			}
			slices.Sort(got)
			if want := []string{"lock:*|lock:released|owner-1", "|lock:released|owner-1"}; !slices.Equal(got, want) {
				t.Errorf("messages %q, want %q", got, want)
			}
			// The keepalive PING of a subscribed connection.
			if err := ps.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			// Many publishers at once: every message arrives, in each
			// publisher's order.
			const publishers, each = 8, 200
			var wg sync.WaitGroup
			for i := range publishers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range each {
						rdb.Publish(ctx, "lock:released", strconv.Itoa(i)+":"+strconv.Itoa(j))
					}
				}()
			}
			last := map[string]int{}
			for range 2 * publishers * each {
				msg, err := ps.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				who, seq, _ := strings.Cut(msg.Payload, ":")
				key := who + "|" + msg.Pattern
				n, _ := strconv.Atoi(seq)
				if prev, ok := last[key]; n != prev+1 && (ok || n != 0) {
					t.Fatalf("message %q after %d", msg.Payload, prev)
				}
				last[key] = n
			}
			wg.Wait()
		})
	}
}

// Redis's unit/pubsubshard: after SUNSUBSCRIBE without arguments, or
// UNSUBSCRIBE and PUNSUBSCRIBE without arguments (which leave shard
// channels alone), SPUBLISH counts the subscribers that are left.
func TestDiffShardSubscribersAfterUnsubscribeAll(t *testing.T) {
	p := newPair(t)
	for _, unsubscribe := range []string{"SUNSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE"} {
		sub := p.another()
		sub.Send("SSUBSCRIBE", "chan1", "chan2", "chan3")
		for range 3 {
			sub.Read()
		}
		sub.Send(unsubscribe)
		if unsubscribe != "SUNSUBSCRIBE" {
			sub.Read()
		} else {
			// One reply per channel, in the order of Redis's hash table:
			// compare the channels as a set and the counts in order.
			var want, got []string
			for range 3 {
				want, got = append(want, sub.redis.Read()), append(got, sub.ls.Read())
			}
			counts := func(replies []string) (channels, left []string) {
				for _, r := range replies {
					lines := strings.Split(r, "\r\n")
					channels, left = append(channels, lines[4]), append(left, lines[5])
				}
				slices.Sort(channels)
				return channels, left
			}
			wc, wl := counts(want)
			gc, gl := counts(got)
			if !slices.Equal(wc, gc) || !slices.Equal(wl, gl) {
				t.Errorf("SUNSUBSCRIBE:\n redis-server: %q\n   lockserver: %q", want, got)
			}
		}
		for _, ch := range []string{"chan1", "chan2", "chan3"} {
			p.Do("SPUBLISH", ch, "hello")
		}
		p.Do("PUBSUB", "SHARDNUMSUB", "chan1", "chan2", "chan3")
		sub.redis.conn.Close()
		sub.ls.conn.Close()
	}
}

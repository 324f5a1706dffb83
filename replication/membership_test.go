package replication

import (
	"testing"

	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/lockserver/lockserver/keyspace"
)

// A new node joins through any member, serves once caught up and becomes a
// voter; LOCKSERVER REMOVE on any member takes it out again.
func TestClusterJoinAndRemove(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	via := c.followers(l)[0]
	wantReply(t, "SET before the join", c.set(l, 0, "k", "v"), keyspace.OK)
	n4 := c.add("n4")
	n4.start(RaftOptions{Join: via.raftAddr()})
	role := func(id string) string {
		for _, m := range c.leader().eng.Status().Members {
			if m.ID == id {
				if m.Voter {
					return "voter"
				}
				return "nonvoter"
			}
		}
		return "absent"
	}
	c.eventually("n4 promoted to voter", func() bool { return role("n4") == "voter" })
	wantReply(t, "GET through n4", c.do(n4, 0, "GET", "k"), keyspace.Bulk("v"))

	members := do(c.leader(), 0, "LOCKSERVER", "MEMBERS")
	if members.Kind != keyspace.KindArray || len(members.Elems) != 4 {
		t.Fatalf("LOCKSERVER MEMBERS with four nodes = %+v", members)
	}
	wantReply(t, "LOCKSERVER MEMBERS: n4's entry", members.Elems[3], keyspace.Map(
		keyspace.Bulk("id"), keyspace.Bulk("n4"), keyspace.Bulk("raft"), keyspace.Bulk("raft-n4"),
		keyspace.Bulk("client"), keyspace.Bulk("client-n4"), keyspace.Bulk("role"), keyspace.Bulk("voter"),
		keyspace.Bulk("version"), keyspace.Bulk(buildinfo.Version)))

	// After UNKNOWN, whether n4 is still a member says what happened.
	for r := c.do(via, 0, "LOCKSERVER", "REMOVE", "n4"); !same(r, keyspace.OK); r = c.do(via, 0, "LOCKSERVER", "REMOVE", "n4") {
		wantErrPrefix(t, "LOCKSERVER REMOVE n4", r, "UNKNOWN")
		if role("n4") == "absent" {
			break
		}
	}
	c.eventually("n4 removed", func() bool { return role("n4") == "absent" && c.leader().eng.memberAddr("n4") == "" })
	wantReply(t, "SET after the removal", c.set(via, 0, "k", "w"), keyspace.OK)
}

// A JOIN that names a live member's id at other addresses is refused, through
// the leader or a follower, and the member stays a voter where it is; the same
// addresses are the member itself, wiped and restarted, and get OK. Once the
// member is down, a JOIN of its id at new addresses (it moved) is accepted.
func TestClusterJoinRefusesALiveMembersID(t *testing.T) {
	testenv.Long(t)
	c := newTestCluster(t, 3)
	l := c.leader()
	fs := c.followers(l)
	live, via := fs[0], fs[1]
	for _, n := range []*testNode{l, via} {
		wantErrPrefix(t, "JOIN of "+live.id+" at other addresses through "+n.id,
			do(n, 0, "LOCKSERVER", "JOIN", live.id, "raft-elsewhere", "client-elsewhere"), "ERR node "+live.id+" is a live member")
	}
	member := func(id string) (Member, bool) {
		for _, m := range c.leader().eng.Status().Members {
			if m.ID == id {
				return m, true
			}
		}
		return Member{}, false
	}
	if m, _ := member(live.id); !m.Voter || m.raftAddr != live.raftAddr() {
		t.Fatalf("after the refused JOIN, %s is %+v", live.id, m)
	}
	wantReply(t, "SET after the refused JOINs", do(via, 0, "SET", "k", "v"), keyspace.OK)
	c.eventually(live.id+" applies the SET", func() bool { return same(localGet(live, "k"), keyspace.Bulk("v")) })

	// A JOIN's reply is the cluster's identity, which the joiner adopts.
	wantReply(t, "JOIN of "+live.id+" at its own addresses", do(via, 0, "LOCKSERVER", "JOIN", live.id, live.raftAddr(), live.clientAddr()),
		keyspace.Bulk(bootstrapClusterID(c.peers, "").String()))
	c.eventually(live.id+" a voter again", func() bool { m, _ := member(live.id); return m.Voter })

	live.stop()
	c.eventually("the JOIN of the stopped "+live.id+" at new addresses", func() bool {
		return do(c.leader(), 0, "LOCKSERVER", "JOIN", live.id, "raft-moved", "client-moved").Kind != keyspace.KindError
	})
	if m, ok := member(live.id); !ok || m.Voter || m.raftAddr != "raft-moved" || m.ClientAddr != "client-moved" {
		t.Fatalf("after the JOIN of the stopped member at new addresses, it is %+v", m)
	}
}

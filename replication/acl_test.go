package replication

import (
	"fmt"
	"testing"

	"github.com/lockserver/lockserver/internal/acl"
)

// A new cluster's first leader seeds the users with its own, which every
// member then enforces: members started with different default passwords
// end with one of them, the same everywhere, and the others no longer work.
// A change made after goes everywhere too.
func TestClusterSeedsUsers(t *testing.T) {
	c := &testCluster{t: t, cut: map[[2]string]bool{}, logs: newNodeLog(t)}
	var peers []Peer
	for i := range 3 {
		n := c.add(fmt.Sprintf("n%d", i+1))
		peers = append(peers, Peer{ID: n.id, RaftAddr: n.raftAddr()})
	}
	users := make([]*acl.Registry, 3)
	for i, n := range c.Nodes {
		def, err := acl.SetUser(acl.NewDefault(), acl.DefaultName, [][]byte{[]byte("resetpass"), []byte(fmt.Sprint(">pw", i))})
		if err != nil {
			t.Fatal(err)
		}
		users[i] = acl.NewRegistry(def)
		n.start(RaftOptions{Bootstrap: peers, Users: users[i]})
	}
	t.Cleanup(c.close)
	c.leader()
	seeded := func() string {
		pass := ""
		for i := range 3 {
			p := fmt.Sprint("pw", i)
			if users[0].Authenticate([]byte("default"), []byte(p)) != nil {
				pass = p
			}
		}
		for _, u := range users {
			if !u.Seeded() || u.Authenticate([]byte("default"), []byte(pass)) == nil || len(u.Default().User().Passwords()) != 1 {
				return ""
			}
		}
		return pass
	}
	c.eventually("one member's users everywhere", func() bool { return seeded() != "" })
	l := c.leader()
	if r := do(l, 0, "ACL", "SETUSER", "alice", "on", "#"+acl.HashPassword([]byte("a")), "+get", "~k"); r.IsError() {
		t.Fatal(r.Str)
	}
	c.eventually("a change after the seed everywhere", func() bool {
		for _, u := range users {
			if u.Authenticate([]byte("alice"), []byte("a")) == nil {
				return false
			}
		}
		return true
	})
}

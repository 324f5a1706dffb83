package lockserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/clustertest/embedded"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// aclOn runs an ACL command through member m as a client would across a
// leader change: a change of the users is idempotent, so it is sent again
// after TRYAGAIN, CLUSTERDOWN or UNKNOWN.
func aclOn(t testing.TB, m *embedded.Member, args ...any) {
	t.Helper()
	clustertest.Eventually(t, fmt.Sprint(args...), func() error {
		err := m.Client().Do(context.Background(), args...).Err()
		if err != nil && !clustertest.WriteErr(err) {
			t.Fatalf("%v: %v", args, err)
		}
		return err
	})
}

// checkUsers checks on every running member that the users are the same and
// enforced alike: user authenticates with pass, may lock, and is refused
// another key, inside a script too.
func checkUsers(t testing.TB, ms []*embedded.Member, user, pass string) {
	t.Helper()
	ctx := context.Background()
	// A member may not have applied the last change yet.
	clustertest.Eventually(t, "the same users on every member", func() error {
		var list string
		for _, m := range ms {
			if m.Server() == nil {
				continue
			}
			v, err := m.Client().Do(ctx, "ACL", "LIST").StringSlice()
			got := strings.Join(v, "\n")
			switch {
			case err != nil:
				return err
			case !strings.Contains(got, "user "+user+" "):
				return fmt.Errorf("%s: ACL LIST has no %s: %q", m.ID(), user, got)
			case list != "" && got != list:
				return fmt.Errorf("members differ on ACL LIST:\n%s\n%s", list, got)
			}
			list = got
		}
		return nil
	})
	for _, m := range ms {
		if m.Server() == nil {
			continue
		}
		u := redis.NewClient(&redis.Options{Addr: m.Options.Addr, Username: user, Password: pass})
		clustertest.Eventually(t, "a lock as "+user+" on "+m.ID(), func() error {
			return u.Set(ctx, "lock:"+m.ID(), "v", 0).Err()
		})
		if err := u.Get(ctx, "other").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%s: GET other as %s = %v, want NOPERM", m.ID(), user, err)
		}
		err := u.Eval(ctx, "return redis.call('get', 'other')", nil).Err()
		if err == nil || !strings.Contains(err.Error(), "The user executing the script can't access at least one of the keys") {
			t.Errorf("%s: a script reading another key as %s = %v", m.ID(), user, err)
		}
		if err := redis.NewClient(&redis.Options{Addr: m.Options.Addr, Username: user, Password: "wrong"}).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
			t.Errorf("%s: a wrong password = %v, want WRONGPASS", m.ID(), err)
		}
		u.Close()
	}
}

// The users are the cluster's: an ACL change made through a follower reaches
// every member, is enforced alike, survives the loss of the leader, reaches
// a member that was down, and survives a restart of the whole cluster from
// its snapshots and logs. Passwords reach the log only hashed.
func TestClusterACLUsers(t *testing.T) {
	testenv.Long(t)
	c := startMembers(t, "s3cret")
	followers := c.Followers(c.Leader(t))
	aclOn(t, followers[0], "ACL", "SETUSER", "locker", "on", ">locker-secret", "~lock:*", "+@all", "-@dangerous")
	checkUsers(t, c.Nodes, "locker", "locker-secret")

	leader := c.Leader(t)
	leader.Stop()
	followers = c.Followers(c.Leader(t))
	checkUsers(t, c.Nodes, "locker", "locker-secret")
	aclOn(t, followers[0], "ACL", "SETUSER", "late", "on", ">late-secret", "~lock:*", "+@all")
	aclOn(t, followers[0], "ACL", "SETUSER", "locker", "<locker-secret", ">locker-secret-2")
	leader.Start(t)
	checkUsers(t, c.Nodes, "late", "late-secret")
	checkUsers(t, c.Nodes, "locker", "locker-secret-2")

	// Snapshots carry the users, then the logs take over.
	for _, m := range c.Nodes {
		clustertest.Eventually(t, "LOCKSERVER SNAPSHOT", func() error { return m.Client().Do(context.Background(), "LOCKSERVER", "SNAPSHOT").Err() })
	}
	followers = c.Followers(c.Leader(t))
	aclOn(t, followers[0], "ACL", "DELUSER", "late")
	for _, m := range c.Nodes {
		m.Stop()
	}
	for _, m := range c.Nodes {
		m.Start(t)
	}
	c.Leader(t)
	checkUsers(t, c.Nodes, "locker", "locker-secret-2")
	for _, m := range c.Nodes {
		if v, err := m.Client().Do(context.Background(), "ACL", "GETUSER", "late").Result(); err != redis.Nil {
			t.Errorf("%s: the user deleted before the restart: %v %v", m.ID(), v, err)
		}
	}

	// No cleartext password in any member's data directory.
	for _, m := range c.Nodes {
		m.Stop()
		filepath.WalkDir(m.Options.Cluster.DataDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			for _, secret := range []string{"locker-secret", "late-secret"} {
				if err == nil && bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s holds the password %q in clear", path, secret)
				}
			}
			return nil
		})
	}
}

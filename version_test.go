package lockserver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/internal/buildinfo"
	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/lockserver/lockserver/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// A server names the release it runs in INFO and in its metrics.
func TestServerNamesItsRelease(t *testing.T) {
	s := open(t, lockserver.Options{})
	hs := httptest.NewServer(s.Handler(nil))
	defer hs.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := "lockserver_version:" + buildinfo.Version + "\r\n"; !strings.Contains(info, want) {
		t.Errorf("INFO server has no %q:\n%s", want, info)
	}
	if v := scrape(t, hs.URL+"/metrics").value("lockserver_build_info", "version", buildinfo.Version); v != 1 {
		t.Errorf("lockserver_build_info{version=%q} = %v, want 1", buildinfo.Version, v)
	}
}

// Every member says which release it runs and which cluster version the
// log records, and the leader, which has a link with every member, says
// which release each runs; a new cluster of one release is at its version.
func TestMembersNameTheirReleases(t *testing.T) {
	testenv.Long(t)
	c := startMembers(t, "")
	ctx := context.Background()
	clustertest.Eventually(t, "every member's release and the cluster version", func() error {
		for _, m := range c.Nodes {
			st, err := m.Client().Do(ctx, "LOCKSERVER", "STATUS").Result()
			if err != nil {
				return err
			}
			if v := st.(map[any]any)["version"]; v != buildinfo.Version {
				return fmt.Errorf("%s says it runs %v", m.ID(), v)
			}
			if v := st.(map[any]any)["cluster_version"]; v != buildinfo.Current.String() {
				return fmt.Errorf("%s says the cluster version is %v", m.ID(), v)
			}
		}
		members, err := c.Leader(t).Client().Do(ctx, "LOCKSERVER", "MEMBERS").Result()
		if err != nil {
			return err
		}
		for _, m := range members.([]any) {
			if v := m.(map[any]any)["version"]; v != buildinfo.Version {
				return fmt.Errorf("the leader says %v runs %v", m.(map[any]any)["id"], v)
			}
		}
		return nil
	})
}

package server

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lockserver/lockserver/replication"
	"github.com/redis/go-redis/v9"
)

// scriptedCluster is a cluster member's engine whose view of the cluster the
// test sets, and whose leader changes the test reports.
type scriptedCluster struct {
	*replication.Standalone
	mu     sync.Mutex
	status replication.RaftStatus
	notify func(replication.Leader)
}

func (e *scriptedCluster) Status() replication.RaftStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}
func (e *scriptedCluster) WatchLeader(f func(replication.Leader)) { e.notify = f }
func (e *scriptedCluster) Unreachable() []string                  { return nil }
func (e *scriptedCluster) Timeouts() (heartbeat, election time.Duration) {
	return time.Second, time.Second
}
func (e *scriptedCluster) TransferLeadership(context.Context, [][]byte) error {
	return replication.ErrNoOtherVoter
}

// lead makes id the leader in the engine's status, as this node sees it;
// "" means no leader.
func (e *scriptedCluster) lead(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LeaderID, e.status.LeaderAddr = id, ""
	for _, m := range e.status.Members {
		if m.ID == id {
			e.status.LeaderAddr = m.ClientAddr
		}
	}
}

// The +switch-master messages a node publishes as it learns of leaders,
// also when a leader's address arrives after its id.
func TestSentinelSwitchMessages(t *testing.T) {
	hub := NewHub()
	engine := &scriptedCluster{Standalone: replication.NewStandalone(replication.StandaloneOptions{Hub: hub})}
	defer engine.Standalone.Close()
	engine.status = replication.RaftStatus{NodeID: "n1", State: "follower", Members: []replication.Member{
		{ID: "n1", ClientAddr: "10.0.0.1:7001", Voter: true},
		{ID: "n2", ClientAddr: "10.0.0.2:7002", Voter: true},
		{ID: "n3", ClientAddr: "10.0.0.3:7003", Voter: true},
	}}
	s := New(Config{Engine: engine, Hub: hub})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rdb.Close()
	sub := rdb.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE +switch-master: %v", err)
	}
	// Publishing is done when notify returns, so a PING's reply comes next
	// unless a message was published.
	nothing := func(when string) {
		t.Helper()
		sub.Ping(ctx)
		if got, err := sub.ReceiveTimeout(ctx, 10*time.Second); err != nil || fmt.Sprintf("%T", got) != "*redis.Pong" {
			t.Errorf("%s: got %v, %v; want no message", when, got, err)
		}
	}
	message := func(when, want string) {
		t.Helper()
		got, err := sub.ReceiveTimeout(ctx, 10*time.Second)
		if m, ok := got.(*redis.Message); err != nil || !ok || m.Payload != want {
			t.Errorf("%s: got %v, %v; want the message %q", when, got, err, want)
		}
	}

	engine.notify(replication.Leader{ID: "n2"}) // its address is not known yet
	engine.notify(replication.Leader{ID: "n2", ClientAddr: "10.0.0.2:7002"})
	nothing("the first leader")
	engine.notify(replication.Leader{})
	engine.notify(replication.Leader{ID: "n2", ClientAddr: "10.0.0.2:7002"})
	nothing("the same leader again")
	engine.notify(replication.Leader{ID: "n3"})
	nothing("a new leader whose address is not known")
	engine.notify(replication.Leader{ID: "n3", ClientAddr: "10.0.0.3:7003"})
	message("its address known", "mymaster 10.0.0.2 7002 10.0.0.3 7003")
	engine.notify(replication.Leader{ID: "n1"})
	engine.notify(replication.Leader{ID: "n2", ClientAddr: "10.0.0.2:7002"})
	message("after a leader whose address never came", "mymaster 10.0.0.1 7001 10.0.0.2 7002")

	// With no leader, the last one is reported, down.
	engine.lead("")
	engine.notify(replication.Leader{})
	sc := redis.NewSentinelClient(&redis.Options{Addr: ln.Addr().String()})
	defer sc.Close()
	if got, err := sc.GetMasterAddrByName(ctx, "mymaster").Result(); err != nil || fmt.Sprint(got) != "[10.0.0.2 7002]" {
		t.Errorf("GET-MASTER-ADDR-BY-NAME with no leader = %v, %v; want the last one, 10.0.0.2:7002", got, err)
	}
	m, err := sc.Master(ctx, "mymaster").Result()
	if err != nil || m["flags"] != "s_down,o_down,master,disconnected" || m["ip"] != "10.0.0.2" || m["port"] != "7002" {
		t.Errorf("SENTINEL MASTER with no leader = %v, %v; want 10.0.0.2:7002 down", m, err)
	}
	// A follower without a leader vouches for no one but itself.
	want := "NOQUORUM 1 usable Sentinels. Not enough available Sentinels to reach the specified quorum for this master. " +
		"Not enough available Sentinels to reach the majority and authorize a failover"
	if err := sc.CkQuorum(ctx, "mymaster").Err(); err == nil || err.Error() != want {
		t.Errorf("SENTINEL CKQUORUM with no leader = %v, want %q", err, want)
	}
}

//go:build unix

package lockloss

import (
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
)

// startProcCluster starts three lockserver processes bootstrapped as one
// cluster (package clustertest), each with its Raft log in a data directory
// (fsync on) that survives its restarts, and with the binary's own failure
// detection. They reach each other through fnet: each member's --bootstrap
// names the members' Raft proxies (its own its --raft-advertise-addr) and
// its --advertise-addr its own client proxy, so all traffic between members
// crosses the faultNet; the test's clients reach them directly.
func startProcCluster(t *testing.T, fnet *faultNet) *clustertest.Cluster[*clustertest.Proc] {
	return clustertest.StartProcs(t, clustertest.Binary(t), clustertest.ProcClusterOptions{
		Proc: clustertest.ProcOptions{ShippedTimeouts: true, PIDs: fnet.setPID},
		Reach: func(p *clustertest.Proc) (raftAddr, clientAddr string) {
			return fnet.proxy(t, p.ID(), p.RaftAddr(), false).addr(), fnet.proxy(t, p.ID(), p.Addr(), true).addr()
		},
	})
}

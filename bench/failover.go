package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The failover workload: how soon a cluster takes writes again after its
// leader's process is killed (SIGKILL: no hand-over, as in a crash). The
// rolling-restart workload's clients write through the members; for each of
// failoverKills kills the row gives the time from the kill to the first
// acknowledgement of a write sent after it, the longest time any write took,
// and the replies that refused a write or left it unknown. The killed member
// is started again once the cluster takes writes, and the next kill waits
// until it is ready and the cluster has been quiet for rollingQuiet.

// failoverKills is how many leaders the workload kills (one with --smoke).
func failoverKills(b *bench) int {
	if b.cfg.smoke {
		return 1
	}
	return 5
}

func runFailover(ctx context.Context, b *bench, sys system, inst *instance) []row {
	w := startRollingWriters(ctx, b, inst)
	defer w.stop()
	var rows []row
	for kill := 1; kill <= failoverKills(b) && ctx.Err() == nil; kill++ {
		b.progress.step(fmt.Sprintf("%s failover %d", sys.name, kill))
		r := row{Workload: "failover", System: sys.name, Clients: rollingClients, Event: fmt.Sprintf("kill the leader (%d)", kill)}
		w.avoid("")
		sleepCtx(ctx, rollingQuiet)
		leader, err := leaderOf(ctx, inst.members)
		if err != nil {
			return append(rows, r.failed(err))
		}
		r.Event += ", " + strings.TrimPrefix(leader.name, "lockserver-")
		w.avoid(leader.addr)
		w.begin()
		leader.process().kill()
		first := w.firstAck(ctx)
		sleepCtx(ctx, time.Second)
		longest, refused, unknown := w.end()
		if first == 0 {
			return append(rows, r.failed(fmt.Errorf("no write was acknowledged after the kill")))
		}
		r.Took, r.Longest, r.Errors = first, longest, refused+unknown
		r.Note = fmt.Sprintf("%d refused (TRYAGAIN, CLUSTERDOWN, stopping), %d unknown (UNKNOWN, connection lost)", refused, unknown)
		rows = append(rows, r)
		if err := leader.start(); err != nil {
			return append(rows, r.failed(err))
		}
		if err := leader.process().waitReadyFor(ctx, 5*time.Minute, statusReady(leader.addr)); err != nil {
			return append(rows, r.failed(err))
		}
	}
	return rows
}

package replication

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// bootstrapClusterID is the identity of a cluster bootstrapped with voters
// and token: a hash of both, as etcd derives its cluster ID, so that members
// started with the same list agree, and lists that disagree (one member
// alone, two together) give different identities.
func bootstrapClusterID(voters []Peer, token string) memberlink.ClusterID {
	return derivedClusterID("lockserver cluster\x00"+token+"\x00", voters)
}

// derivedClusterID hashes prefix and the list of voters, in any order, into
// a cluster identity: what every member given the same computes alike.
func derivedClusterID(prefix string, voters []Peer) memberlink.ClusterID {
	lines := make([]string, len(voters))
	for i, p := range voters {
		lines[i] = p.ID + "=" + p.RaftAddr
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(prefix + strings.Join(lines, "\n")))
	return memberlink.ClusterID(sum[:16])
}

// randomClusterID is the identity of a cluster that a member started alone,
// with no list of voters: no other member needs to compute it.
func randomClusterID() memberlink.ClusterID {
	var id memberlink.ClusterID
	rand.Read(id[:])
	return id
}

// probeTimeout bounds how long a member with no data asks the other
// bootstrap voters whether their cluster already runs.
const probeTimeout = 2 * time.Second

// establishedPeer asks the other voters of the bootstrap list whether this
// member ran in their cluster before (it registered its client address,
// which it does once it has a leader), and returns the Raft address of one
// that says so: this member, with no data, lost its own, and may have
// acknowledged entries it no longer holds. A member that never ran there
// acknowledged nothing, and bootstraps with the others, however late it
// starts. A member with no data yet, like this one, does not answer (it
// refuses links until it has an identity, so it says so at once); nor does
// one that is down. (Should every other voter be down or cut off, a member
// that lost its data bootstraps all the same: as etcd's does, it cannot
// tell. Nor can the others tell of a member that acknowledged entries and
// lost its data before its registration was committed, moments after its
// first start.)
func (r *Raft) establishedPeer() string {
	ctx, cancel := context.WithTimeout(r.ctx, probeTimeout)
	defer cancel()
	found := make(chan string, len(r.opts.Bootstrap))
	var wg sync.WaitGroup
	for _, p := range r.opts.Bootstrap {
		if p.ID == r.opts.NodeID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.peers.Call(ctx, p.RaftAddr, argLockserver, []byte("REGISTERED"), []byte(r.opts.NodeID))
			if err == nil && res == "1" {
				found <- p.RaftAddr
			}
		}()
	}
	go func() {
		wg.Wait()
		close(found)
	}()
	return <-found
}

// keyClusterID is the stable store's key of the cluster identity.
var keyClusterID = []byte("lockserver_cluster_id")

// identify sets this member's cluster identity before Raft starts: the one
// its stable store holds; for a member with no state, the one it learns by
// joining, derives from its bootstrap list, or draws for a cluster of its own.
func (r *Raft) identify(existing bool, stable raft.StableStore) error {
	o := &r.opts
	stored, err := stable.Get(keyClusterID)
	// A missing key's error, by the convention raft relies on itself.
	if err != nil && err.Error() != "not found" {
		return fmt.Errorf("read the cluster identity: %w", err)
	}
	var id memberlink.ClusterID
	switch {
	case existing && len(stored) == len(id):
		id = memberlink.ClusterID(stored)
	case existing && len(stored) > 0:
		return fmt.Errorf("the stable store holds a bad cluster identity (%d bytes)", len(stored))
	case existing && o.Bootstrap != nil:
		// State kept before members stored their identity: the voters it
		// was bootstrapped with give it.
		id = bootstrapClusterID(o.Bootstrap, o.ClusterToken)
		r.log.Warn("the member's state holds no cluster identity; derived it from the bootstrap list", "cluster", id)
	case existing:
		return errors.New("the member's state holds no cluster identity: start it with the bootstrap list its cluster was created with, or wipe its data and join")
	case o.Join != "":
		if id, err = r.join(); err != nil {
			return err
		}
	case o.Bootstrap != nil:
		id = bootstrapClusterID(o.Bootstrap, o.ClusterToken)
		if via := r.establishedPeer(); via != "" {
			// Bootstrapped, it would be a voter with an empty log, and
			// could elect a candidate that lacks committed entries.
			r.log.Warn("this member has no data, but its cluster has: it joins through another member rather than bootstrap again (its data directory was lost or wiped)",
				"via", via, "cluster", id)
			o.Join = via
			joined, err := r.join()
			if err != nil {
				return err
			}
			if joined != id {
				return fmt.Errorf("the member at %s, of the bootstrap list, is of cluster %s, not of the one the list makes (%s): give this member an empty data directory and --join, or another list", via, joined, id)
			}
		}
	default:
		id = randomClusterID()
	}
	if !bytes.Equal(stored, id[:]) {
		if err := stable.Set(keyClusterID, id[:]); err != nil {
			return fmt.Errorf("store the cluster identity: %w", err)
		}
	}
	r.cluster = id
	if r.link != nil {
		r.link.SetCluster(id)
	}
	r.log.Info("member of cluster", "cluster", id)
	return nil
}

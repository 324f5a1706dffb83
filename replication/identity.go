package replication

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/lockserver/lockserver/replication/internal/memberlink"
)

// bootstrapClusterID is the identity of a cluster bootstrapped with voters
// and token: a hash of both, as etcd derives its cluster ID, so that members
// started with the same list agree, and lists that disagree (one member
// alone, two together) give different identities.
func bootstrapClusterID(voters []Peer, token string) memberlink.ClusterID {
	lines := make([]string, len(voters))
	for i, p := range voters {
		lines[i] = p.ID + "=" + p.RaftAddr
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte("lockserver cluster\x00" + token + "\x00" + strings.Join(lines, "\n")))
	return memberlink.ClusterID(sum[:16])
}

// randomClusterID is the identity of a cluster that a member started alone,
// with no list of voters: no other member needs to compute it.
func randomClusterID() memberlink.ClusterID {
	var id memberlink.ClusterID
	rand.Read(id[:])
	return id
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

package memberlink

import (
	"encoding/hex"
	"fmt"
)

// ClusterID names a cluster for all time. Members bootstrapped with the same
// voters and token compute the same identity; a member that joins learns it
// from the cluster; every member keeps it in its stable store.
type ClusterID [16]byte

func (id ClusterID) String() string { return hex.EncodeToString(id[:]) }

// isZero reports whether id is unset: a member that has not joined yet.
func (id ClusterID) isZero() bool { return id == ClusterID{} }

// ParseClusterID reads a cluster identity as String writes it.
func ParseClusterID(s string) (ClusterID, error) {
	var id ClusterID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) || ClusterID(b).isZero() {
		return id, fmt.Errorf("bad cluster identity %q", s)
	}
	return ClusterID(b), nil
}

package server

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/lockserver/lockserver/keyspace"
	"github.com/lockserver/lockserver/replication"
)

// Sentinel-compatible discovery. Every node answers the SENTINEL commands that
// clients configured for Redis Sentinel send (go-redis's FailoverClient,
// Redisson's sentinel mode, redis-py's Sentinel) as a Sentinel would that
// monitors one master, the Raft leader: the leader's followers are its
// replicas, and every member is a Sentinel. Each node publishes
// +switch-master to its own subscribers when it learns of a new leader. Such
// clients then follow the leader given only the nodes' addresses and the
// master name. A standalone node is the master of itself, with no replicas and
// no other Sentinels.

// defaultSentinelMaster is the master name SENTINEL answers to unless
// configured otherwise: the name in Redis's sample sentinel.conf and in the
// Sentinel examples of go-redis and Redisson, so that clients set up for a
// stock Sentinel need no change.
const defaultSentinelMaster = "mymaster"

// clusterEngine is what a cluster member's engine (replication.Raft) offers
// the SENTINEL commands beyond Engine; a standalone engine has none of it.
type clusterEngine interface {
	Status() replication.RaftStatus
	WatchLeader(f func(replication.Leader))
	Unreachable() []string
	Timeouts() (heartbeat, election time.Duration)
	TransferLeadership(ctx context.Context, args [][]byte) error
}

// sentinelState is what a node keeps for the SENTINEL commands.
type sentinelState struct {
	name    string        // the master name clients ask for
	cluster clusterEngine // nil on a standalone node

	mu sync.Mutex
	// last is the last leader known; its client address may arrive after
	// its id. As a Sentinel keeps reporting a master until a failover
	// replaces it, it is reported while no leader is known.
	last   replication.Leader
	since  time.Time // when last became the leader
	lostAt time.Time // when this node lost touch with the leader; zero while it has one
	// switchFrom is the client address of the leader before last while the
	// switch to last is not announced yet (last's address being unknown).
	switchFrom string
}

// startSentinel sets up the SENTINEL commands and, on a cluster member,
// follows the leader.
func (s *Server) startSentinel(name string) {
	if name == "" {
		name = defaultSentinelMaster
	}
	st := &s.sentinel
	st.name, st.since = name, s.started
	if ce, ok := s.engine.(clusterEngine); ok {
		st.cluster = ce
		ce.WatchLeader(s.leaderChanged)
	}
}

// leaderChanged records what the engine reports of the leader and, once
// leadership has moved from one node to another and both addresses are
// known, tells this node's subscribers as a Sentinel does after a failover:
// "+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>". The
// engine calls it from one goroutine, so only readers race with it.
func (s *Server) leaderChanged(l replication.Leader) {
	st := &s.sentinel
	if l.ID == "" {
		st.mu.Lock()
		if st.lostAt.IsZero() {
			st.lostAt = time.Now()
		}
		st.mu.Unlock()
		return
	}
	prev := st.last
	// A leader that lost leadership before this node learned its address
	// has it in the member map by now.
	if prev.ID != "" && prev.ID != l.ID && prev.ClientAddr == "" {
		for _, m := range st.cluster.Status().Members {
			if m.ID == prev.ID {
				prev.ClientAddr = m.ClientAddr
			}
		}
	}
	st.mu.Lock()
	st.lostAt = time.Time{}
	if l.ID != prev.ID {
		st.last, st.since, st.switchFrom = l, time.Now(), prev.ClientAddr
	} else if l.ClientAddr != "" {
		st.last.ClientAddr = l.ClientAddr
	}
	from, to := st.switchFrom, st.last.ClientAddr
	if to != "" {
		st.switchFrom = ""
	}
	st.mu.Unlock()
	if from == "" || to == "" || from == to {
		return
	}
	fromHost, fromPort := splitAddr(from)
	toHost, toPort := splitAddr(to)
	s.hub.Publish([]byte("+switch-master"), []byte(st.name+" "+fromHost+" "+fromPort+" "+toHost+" "+toPort), false)
}

// splitAddr splits a client address into host and port. An address that is
// not host:port (an in-memory connection's) is a host with port 0.
func splitAddr(addr string) (host, port string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "0"
	}
	return host, port
}

// nodeRunID is the run id a member is known by, the same on every node: the
// hex SHA1 of its node id, 40 characters as Redis's run ids are.
func nodeRunID(id string) string {
	sum := sha1.Sum([]byte(id))
	return hex.EncodeToString(sum[:])
}

// sentinelNode is a member as the SENTINEL commands present it.
type sentinelNode struct {
	runID, host, port string
	// down is set when the leader's heartbeats to the member fail, which
	// Sentinel reports as a disconnected link.
	down bool
	// voter is set for a member that may be elected; a non-voter, still
	// catching up, is a replica that is never promoted (priority 0).
	voter bool
}

func (n sentinelNode) addr() string { return net.JoinHostPort(n.host, n.port) }

// sentinelView is the cluster at one moment, as this node sees it.
type sentinelView struct {
	self sentinelNode
	// master is the leader, or while none is known the last one (masterUp
	// false); its host is empty when this node never knew one.
	master    sentinelNode
	masterUp  bool
	replicas  []sentinelNode // the members but the master
	sentinels []sentinelNode // the members but this node
	// voters counts the members that vote in elections; usable those of them
	// that this node can vouch for.
	voters, usable int
	epoch          uint64 // the Raft term: the epoch of the last failover
	leading        bool
	applied        uint64 // this node's applied index: its replication offset
	since, lostAt  time.Time
	// downAfter and failoverTimeout are the heartbeat and election
	// timeouts, Raft's counterparts of Sentinel's settings.
	downAfter, failoverTimeout time.Duration
}

// sentinelView describes the cluster for c. A standalone node is the master,
// at the address the client reached it at.
func (c *conn) sentinelView() sentinelView {
	st := &c.srv.sentinel
	st.mu.Lock()
	last, since, lostAt := st.last, st.since, st.lostAt
	st.mu.Unlock()
	if st.cluster == nil {
		self := sentinelNode{runID: c.srv.runID}
		self.host, self.port = splitAddr(c.laddr)
		return sentinelView{self: self, master: self, masterUp: true, voters: 1, usable: 1, leading: true, since: since}
	}
	rs := st.cluster.Status()
	v := sentinelView{epoch: rs.Term, leading: rs.State == "leader", applied: rs.AppliedIndex, since: since, lostAt: lostAt}
	v.downAfter, v.failoverTimeout = st.cluster.Timeouts()
	master := last
	if rs.LeaderAddr != "" {
		master = replication.Leader{ID: rs.LeaderID, ClientAddr: rs.LeaderAddr}
		v.masterUp = true
	}
	if master.ClientAddr != "" {
		v.master = sentinelNode{runID: nodeRunID(master.ID)}
		v.master.host, v.master.port = splitAddr(master.ClientAddr)
	}
	down := map[string]bool{}
	for _, id := range st.cluster.Unreachable() {
		down[id] = true
	}
	v.self = sentinelNode{runID: nodeRunID(rs.NodeID)}
	v.self.host, v.self.port = splitAddr(c.laddr)
	var selfVoter bool
	for _, m := range rs.Members {
		if m.Voter {
			v.voters++
			if !down[m.ID] {
				v.usable++
			}
			selfVoter = selfVoter || m.ID == rs.NodeID
		}
		n := sentinelNode{runID: nodeRunID(m.ID), down: down[m.ID], voter: m.Voter}
		n.host, n.port = splitAddr(m.ClientAddr)
		if m.ID == rs.NodeID && m.ClientAddr != "" {
			v.self = n
		}
		if m.ClientAddr == "" {
			continue // not registered yet: no client can reach it
		}
		if m.ID != master.ID {
			v.replicas = append(v.replicas, n)
		}
		if m.ID != rs.NodeID {
			v.sentinels = append(v.sentinels, n)
		}
	}
	// Only the leader sees the other members, through its heartbeats. A
	// follower sees the leader, which keeps leading only while a majority
	// answers it, and nothing of the rest: with a leader it counts every
	// voter, without one only itself.
	if !v.leading && !v.masterUp {
		v.usable = 0
		if selfVoter {
			v.usable = 1
		}
	}
	return v
}

// quorum is the number of voters that elect a leader: a majority.
func (v *sentinelView) quorum() int { return v.voters/2 + 1 }

// bulkInt returns n as a bulk string: Sentinel gives every value so.
func bulkInt(n int64) keyspace.Reply { return keyspace.Bulk(strconv.FormatInt(n, 10)) }

// sinceMillis returns the milliseconds from t to now, as a bulk string.
func sinceMillis(t time.Time) keyspace.Reply { return bulkInt(time.Since(t).Milliseconds()) }

// instanceHead returns the fields that every kind of instance starts with,
// in Sentinel's order. Sentinel reports on its own links and pings to the
// instance; here nothing is pending and the last ping was answered just now.
func instanceHead(name string, n sentinelNode, flags string) []keyspace.Reply {
	return []keyspace.Reply{
		keyspace.Bulk("name"), keyspace.Bulk(name),
		keyspace.Bulk("ip"), keyspace.Bulk(n.host),
		keyspace.Bulk("port"), keyspace.Bulk(n.port),
		keyspace.Bulk("runid"), keyspace.Bulk(n.runID),
		keyspace.Bulk("flags"), keyspace.Bulk(flags),
		keyspace.Bulk("link-pending-commands"), keyspace.Bulk("0"),
		keyspace.Bulk("link-refcount"), keyspace.Bulk("1"),
		keyspace.Bulk("last-ping-sent"), keyspace.Bulk("0"),
		keyspace.Bulk("last-ok-ping-reply"), keyspace.Bulk("0"),
		keyspace.Bulk("last-ping-reply"), keyspace.Bulk("0"),
	}
}

// masterReply is SENTINEL MASTER's map. While no leader is known the last
// one is reported down, subjectively and objectively: the node lost touch
// with it and the cluster is electing another.
func (v *sentinelView) masterReply(name string) keyspace.Reply {
	m := v.master
	if m.host == "" {
		m.host, m.port, m.runID = "?", "0", "?"
	}
	flags := "master"
	if !v.masterUp {
		flags = "s_down,o_down,master,disconnected"
	}
	f := instanceHead(name, m, flags)
	if !v.masterUp {
		f = append(f,
			keyspace.Bulk("s-down-time"), sinceMillis(v.lostAt),
			keyspace.Bulk("o-down-time"), sinceMillis(v.lostAt))
	}
	f = append(f,
		keyspace.Bulk("down-after-milliseconds"), bulkInt(v.downAfter.Milliseconds()),
		keyspace.Bulk("info-refresh"), keyspace.Bulk("0"),
		keyspace.Bulk("role-reported"), keyspace.Bulk("master"),
		keyspace.Bulk("role-reported-time"), sinceMillis(v.since),
		keyspace.Bulk("config-epoch"), bulkInt(int64(v.epoch)),
		keyspace.Bulk("num-slaves"), bulkInt(int64(len(v.replicas))),
		keyspace.Bulk("num-other-sentinels"), bulkInt(int64(len(v.sentinels))),
		keyspace.Bulk("quorum"), bulkInt(int64(v.quorum())),
		keyspace.Bulk("failover-timeout"), bulkInt(v.failoverTimeout.Milliseconds()),
		// Raft sends the log to every follower at once; Sentinel's default
		// of reconfiguring one replica at a time is the nearest setting.
		keyspace.Bulk("parallel-syncs"), keyspace.Bulk("1"),
	)
	return keyspace.Map(f...)
}

// replicaReply is one entry of SENTINEL REPLICAS: a follower, replicating
// from the leader. hashicorp/raft does not tell how far another node has
// replicated, so only this node's own offset is known.
func (v *sentinelView) replicaReply(n sentinelNode) keyspace.Reply {
	flags, link := "slave", "ok"
	if n.down {
		flags = "slave,disconnected"
	}
	if n.down || !v.masterUp {
		link = "err"
	}
	masterHost, masterPort := v.master.host, v.master.port
	if masterHost == "" {
		masterHost, masterPort = "?", "0"
	}
	var offset uint64
	if n == v.self {
		offset = v.applied
	}
	priority := "0"
	if n.voter {
		priority = "100" // Redis's default replica-priority
	}
	f := instanceHead(n.addr(), n, flags)
	f = append(f,
		keyspace.Bulk("down-after-milliseconds"), bulkInt(v.downAfter.Milliseconds()),
		keyspace.Bulk("info-refresh"), keyspace.Bulk("0"),
		keyspace.Bulk("role-reported"), keyspace.Bulk("slave"),
		keyspace.Bulk("role-reported-time"), sinceMillis(v.since),
		keyspace.Bulk("master-link-down-time"), keyspace.Bulk("0"),
		keyspace.Bulk("master-link-status"), keyspace.Bulk(link),
		keyspace.Bulk("master-host"), keyspace.Bulk(masterHost),
		keyspace.Bulk("master-port"), keyspace.Bulk(masterPort),
		keyspace.Bulk("slave-priority"), keyspace.Bulk(priority),
		keyspace.Bulk("slave-repl-offset"), bulkInt(int64(offset)),
		keyspace.Bulk("replica-announced"), keyspace.Bulk("1"),
	)
	return keyspace.Map(f...)
}

// sentinelReply is one entry of SENTINEL SENTINELS: another member. Raft's
// votes are not Sentinel's, so no vote is reported.
func (v *sentinelView) sentinelReply(n sentinelNode) keyspace.Reply {
	flags := "sentinel"
	if n.down {
		flags = "sentinel,disconnected"
	}
	f := instanceHead(n.runID, n, flags)
	f = append(f,
		keyspace.Bulk("down-after-milliseconds"), bulkInt(v.downAfter.Milliseconds()),
		keyspace.Bulk("last-hello-message"), keyspace.Bulk("0"),
		keyspace.Bulk("voted-leader"), keyspace.Bulk("?"),
		keyspace.Bulk("voted-leader-epoch"), keyspace.Bulk("0"),
	)
	return keyspace.Map(f...)
}

var errNoSuchMaster = keyspace.Error("ERR No such master with that name")

// The server runs the SENTINEL subcommands and ROLE.
func init() {
	registerHandlers(map[string]handler{
		"role": cmdRole,
		"sentinel|get-master-addr-by-name": func(c *conn, args [][]byte) {
			v := c.sentinelView()
			if string(args[2]) != c.srv.sentinel.name || v.master.host == "" {
				c.reply(keyspace.NullArray)
				return
			}
			c.reply(keyspace.Array(keyspace.Bulk(v.master.host), keyspace.Bulk(v.master.port)))
		},
		"sentinel|masters": func(c *conn, args [][]byte) {
			v := c.sentinelView()
			c.reply(keyspace.Array(v.masterReply(c.srv.sentinel.name)))
		},
		"sentinel|master": func(c *conn, args [][]byte) {
			if knownMaster(c, args) {
				v := c.sentinelView()
				c.reply(v.masterReply(c.srv.sentinel.name))
			}
		},
		"sentinel|replicas": cmdSentinelReplicas,
		"sentinel|slaves":   cmdSentinelReplicas,
		"sentinel|sentinels": func(c *conn, args [][]byte) {
			if !knownMaster(c, args) {
				return
			}
			v := c.sentinelView()
			elems := make([]keyspace.Reply, len(v.sentinels))
			for i, n := range v.sentinels {
				elems[i] = v.sentinelReply(n)
			}
			c.reply(keyspace.Array(elems...))
		},
		"sentinel|myid":     func(c *conn, args [][]byte) { c.reply(keyspace.Bulk(c.sentinelView().self.runID)) },
		"sentinel|ckquorum": cmdSentinelCkQuorum,
		"sentinel|failover": cmdSentinelFailover,
		"sentinel|help": help("SENTINEL",
			"CKQUORUM <master-name>", "    Check if the current Sentinel configuration is able to reach the quorum",
			"    needed to failover a master and the majority needed to authorize the",
			"    failover.",
			"GET-MASTER-ADDR-BY-NAME <master-name>", "    Return the ip and port number of the master with that name.",
			"FAILOVER <master-name>", "    Hand the Raft leadership to the most up-to-date other voter.",
			"MASTER <master-name>", "    Show the state and info of the specified master.",
			"MASTERS", "    Show a list of monitored masters and their state.",
			"MYID", "    Return the ID of the Sentinel instance.",
			"REPLICAS <master-name>", "    Show a list of replicas for this master and their state.",
			"SENTINELS <master-name>", "    Show a list of Sentinel instances for this master and their state."),
	})
}

// knownMaster reports whether args[2] names the master, and replies
// Sentinel's error if not.
func knownMaster(c *conn, args [][]byte) bool {
	if string(args[2]) != c.srv.sentinel.name {
		c.reply(errNoSuchMaster)
		return false
	}
	return true
}

// SENTINEL REPLICAS|SLAVES <master-name>
func cmdSentinelReplicas(c *conn, args [][]byte) {
	if !knownMaster(c, args) {
		return
	}
	v := c.sentinelView()
	elems := make([]keyspace.Reply, len(v.replicas))
	for i, n := range v.replicas {
		elems[i] = v.replicaReply(n)
	}
	c.reply(keyspace.Array(elems...))
}

// SENTINEL CKQUORUM <master-name>, with Sentinel's texts. A failover here is
// a Raft election, which needs a majority of the voters; the voters usable are
// those not known to be down, which only the leader can tell.
func cmdSentinelCkQuorum(c *conn, args [][]byte) {
	if !knownMaster(c, args) {
		return
	}
	v := c.sentinelView()
	usable := strconv.Itoa(v.usable)
	if v.usable >= v.quorum() {
		c.reply(keyspace.Status("OK " + usable + " usable Sentinels. Quorum and failover authorization can be reached"))
		return
	}
	// The quorum is the majority, so both of Sentinel's conditions fail together.
	c.reply(keyspace.Error("NOQUORUM " + usable + " usable Sentinels. " +
		"Not enough available Sentinels to reach the specified quorum for this master. " +
		"Not enough available Sentinels to reach the majority and authorize a failover"))
}

// failoverTimeout bounds SENTINEL FAILOVER: the leader hands over within an
// election timeout, so it is only reached when no leader can be found.
const failoverTimeout = 10 * time.Second

// SENTINEL FAILOVER <master-name> hands the Raft leadership to another voter
// and replies once the leader has stepped down (a Sentinel replies at the
// start). Clients then follow the new leader as after any election.
func cmdSentinelFailover(c *conn, args [][]byte) {
	if !knownMaster(c, args) {
		return
	}
	cluster := c.srv.sentinel.cluster
	if cluster == nil {
		c.reply(errNoGoodReplica)
		return
	}
	ctx, cancel := context.WithTimeout(c.srv.ctx, failoverTimeout)
	defer cancel()
	err := cluster.TransferLeadership(ctx, args)
	errReply, isReply := errorReply(err)
	switch {
	case err == nil:
		c.reply(keyspace.OK)
	case errors.Is(err, replication.ErrNoOtherVoter):
		c.reply(errNoGoodReplica)
	case errors.Is(err, replication.ErrTransferInProgress):
		c.reply(keyspace.Error("INPROG Failover already in progress"))
	case isReply:
		c.reply(errReply) // the leader's own reply
	default:
		c.reply(keyspace.Error("ERR failover: " + err.Error()))
	}
}

var errNoGoodReplica = keyspace.Error("NOGOODSLAVE No suitable replica to promote")

// ROLE, as Redis answers it: on the leader (and a standalone node)
// ["master", offset, [[ip, port, offset], ...]], on a follower ["slave",
// leader ip, leader port, link state, offset]. Offsets are applied log
// indexes; a replica's is reported as 0, its progress being unknown here.
// The leader lists the replicas that answer it, as Redis lists its online
// ones: those INFO's connected_slaves counts and WAIT can count.
// A follower forwards writes to the leader, so clients that find it by
// Sentinel work through it too.
func cmdRole(c *conn, args [][]byte) {
	v := c.sentinelView()
	if v.leading {
		replicas := make([]keyspace.Reply, 0, len(v.replicas))
		for _, n := range v.replicas {
			if !n.down {
				replicas = append(replicas, keyspace.Array(keyspace.Bulk(n.host), keyspace.Bulk(n.port), keyspace.Bulk("0")))
			}
		}
		c.reply(keyspace.Array(keyspace.Bulk("master"), keyspace.Int(int64(v.applied)), keyspace.Array(replicas...)))
		return
	}
	host, port := v.master.host, v.master.port
	if host == "" {
		host, port = "?", "0"
	}
	state := "connected"
	if !v.masterUp {
		state = "connect"
	}
	p, _ := strconv.ParseInt(port, 10, 64)
	c.reply(keyspace.Array(keyspace.Bulk("slave"), keyspace.Bulk(host), keyspace.Int(p), keyspace.Bulk(state), keyspace.Int(int64(v.applied))))
}

package server

import (
	"strconv"
	"strings"
	"time"

	"github.com/lockserver/lockserver/keyspace"
)

// Redis Cluster compatibility. Every node answers the CLUSTER commands that
// Redis Cluster clients (go-redis's ClusterClient, Redisson's cluster mode)
// use to learn the layout, as a node of a Redis Cluster with one shard that
// owns all 16384 slots would: the Raft leader is the shard's master and its
// followers are the master's replicas, taken from the same view of the
// cluster as the SENTINEL commands (sentinelView). A follower takes writes
// too (it forwards them) and its reads are linearizable, so no command is
// ever redirected: a client may send anything to any node, and MOVED and ASK
// never happen. A standalone node is a one-node cluster, its own master.
//
// INFO keeps saying cluster_enabled:0 and redis_mode:standalone, and HELLO
// mode "standalone". That is what a node is to every other client: unlike a
// cluster-enabled Redis it lets clients SELECT databases 1-15 and mix keys
// of different slots in one command, transaction or script, and clients in
// replicated or Sentinel mode, which read INFO, must keep seeing the server
// they expect. Cluster clients learn the layout from CLUSTER SLOTS, SHARDS
// and NODES only, so the CLUSTER view is a presentation added beside the
// standalone one, as the SENTINEL view is.

// clusterNode is a member as the CLUSTER commands present it.
type clusterNode struct {
	sentinelNode
	id      string
	master  bool // the shard's master, which owns every slot
	myself  bool
	failing bool // out of touch: Redis's PFAIL
	offset  uint64
}

// clusterView is the layout at one moment as this node sees it: the master
// first (when one is known), then the replicas. Term is the Raft term,
// reported as the cluster's epochs.
type clusterView struct {
	nodes []clusterNode
	term  uint64
}

// clusterView describes the cluster for c from the Sentinel view. A
// standalone node's id is derived from the address the client reached it at,
// so that it stays the same across restarts as a member's does (Sentinel's
// run id of a standalone node is the process's).
func (c *conn) clusterView() clusterView {
	v := c.sentinelView()
	self := v.self.runID
	if c.srv.sentinel.cluster == nil {
		self = nodeRunID("standalone " + c.laddr)
	}
	cv := clusterView{term: v.epoch}
	node := func(n sentinelNode, id string) clusterNode {
		cn := clusterNode{sentinelNode: n, id: id, myself: n.runID == v.self.runID}
		if cn.myself {
			cn.id, cn.offset = self, v.applied
		}
		return cn
	}
	if v.master.host != "" {
		m := node(v.master, v.master.runID)
		m.master, m.failing = true, !v.masterUp
		cv.nodes = append(cv.nodes, m)
	}
	for _, r := range v.replicas {
		n := node(r, r.runID)
		n.failing = r.down
		cv.nodes = append(cv.nodes, n)
	}
	// A member not registered yet, which no client could reach, still
	// answers for itself.
	found := false
	for _, n := range cv.nodes {
		found = found || n.myself
	}
	if !found {
		cv.nodes = append(cv.nodes, node(v.self, self))
	}
	return cv
}

// master returns the shard's master, if one is known.
func (cv *clusterView) master() (clusterNode, bool) {
	if len(cv.nodes) > 0 && cv.nodes[0].master {
		return cv.nodes[0], true
	}
	return clusterNode{}, false
}

func (cv *clusterView) myself() clusterNode {
	for _, n := range cv.nodes {
		if n.myself {
			return n
		}
	}
	return clusterNode{}
}

// portInt is a node's client port as a number; an in-memory connection's
// address has none (0).
func (n clusterNode) portInt() int64 {
	p, _ := strconv.ParseInt(n.port, 10, 64)
	return p
}

// The server runs CLUSTER's subcommands that describe the layout, and the
// connection commands of cluster clients.
func init() {
	registerHandlers(map[string]handler{
		"cluster|info":    cmdClusterInfo,
		"cluster|myid":    func(c *conn, args [][]byte) { cv := c.clusterView(); c.reply(keyspace.Bulk(cv.myself().id)) },
		"cluster|slots":   cmdClusterSlots,
		"cluster|shards":  cmdClusterShards,
		"cluster|nodes":   cmdClusterNodes,
		"cluster|keyslot": func(c *conn, args [][]byte) { c.reply(keyspace.Int(int64(keyspace.KeySlot(string(args[2]))))) },
		// Every node serves reads and writes alike, so the modes a cluster
		// client switches between need no state here.
		"readonly":  func(c *conn, args [][]byte) { c.reply(keyspace.OK) },
		"readwrite": func(c *conn, args [][]byte) { c.reply(keyspace.OK) },
		"asking":    func(c *conn, args [][]byte) { c.reply(keyspace.OK) },
		"cluster|help": help("CLUSTER",
			"COUNTKEYSINSLOT <slot>", "    Return the number of keys in <slot>.",
			"GETKEYSINSLOT <slot> <count>", "    Return key names stored by current node in a slot.",
			"INFO", "    Return information about the cluster.",
			"KEYSLOT <key>", "    Return the hash slot for <key>.",
			"MYID", "    Return the node id.",
			"NODES", "    Return cluster configuration seen by node. Output format:",
			"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
			"SLOTS", "    Return information about slots range mappings. Each range is made of:",
			"    start, end, master and replicas IP addresses, ports and ids",
			"SHARDS", "    Return information about slot range mappings and the nodes associated with them."),
	})
}

// CLUSTER INFO. The slots are all failing (PFAIL) while the master is out
// of touch, and unassigned while none was ever known; either way the state
// is fail, as writes then fail with CLUSTERDOWN.
func cmdClusterInfo(c *conn, args [][]byte) {
	cv := c.clusterView()
	state, assigned, ok, pfail, size := "fail", 0, 0, 0, 0
	if m, known := cv.master(); known {
		assigned, size = keyspace.ClusterSlots, 1
		if m.failing {
			pfail = keyspace.ClusterSlots
		} else {
			state, ok = "ok", keyspace.ClusterSlots
		}
	}
	var b strings.Builder
	line := func(k string, v any) {
		b.WriteString(k + ":")
		switch v := v.(type) {
		case string:
			b.WriteString(v)
		case int:
			b.WriteString(strconv.Itoa(v))
		case uint64:
			b.WriteString(strconv.FormatUint(v, 10))
		}
		b.WriteString("\r\n")
	}
	line("cluster_state", state)
	line("cluster_slots_assigned", assigned)
	line("cluster_slots_ok", ok)
	line("cluster_slots_pfail", pfail)
	line("cluster_slots_fail", 0)
	line("cluster_known_nodes", len(cv.nodes))
	line("cluster_size", size)
	line("cluster_current_epoch", cv.term)
	line("cluster_my_epoch", cv.term)
	// There is no cluster bus: the members talk Raft.
	line("cluster_stats_messages_sent", 0)
	line("cluster_stats_messages_received", 0)
	line("total_cluster_links_buffer_limit_exceeded", 0)
	c.reply(keyspace.Reply{Kind: keyspace.KindVerbatim, Str: b.String()})
}

// CLUSTER SLOTS: one range, 0-16383, served by the master and the replicas
// not out of touch (Redis leaves failing replicas out), each as [ip, port,
// id, {}]: the last is Redis 7's map of other endpoints, empty here.
func cmdClusterSlots(c *conn, args [][]byte) {
	cv := c.clusterView()
	if _, known := cv.master(); !known {
		c.reply(keyspace.Array())
		return
	}
	r := []keyspace.Reply{keyspace.Zero, keyspace.Int(keyspace.ClusterSlots - 1)}
	for _, n := range cv.nodes {
		if n.master || !n.failing {
			r = append(r, keyspace.Array(keyspace.Bulk(n.host), keyspace.Int(n.portInt()), keyspace.Bulk(n.id), keyspace.Map()))
		}
	}
	c.reply(keyspace.Array(keyspace.Array(r...)))
}

// CLUSTER SHARDS: the one shard, its slot range and its nodes. A node's
// replication offset is known for this node only (its applied index).
func cmdClusterShards(c *conn, args [][]byte) {
	cv := c.clusterView()
	if _, known := cv.master(); !known {
		c.reply(keyspace.Array())
		return
	}
	nodes := make([]keyspace.Reply, len(cv.nodes))
	for i, n := range cv.nodes {
		role, health := "replica", "online"
		if n.master {
			role = "master"
		}
		if n.failing {
			health = "fail"
		}
		nodes[i] = keyspace.Map(
			keyspace.Bulk("id"), keyspace.Bulk(n.id),
			keyspace.Bulk("port"), keyspace.Int(n.portInt()),
			keyspace.Bulk("ip"), keyspace.Bulk(n.host),
			keyspace.Bulk("endpoint"), keyspace.Bulk(n.host),
			keyspace.Bulk("role"), keyspace.Bulk(role),
			keyspace.Bulk("replication-offset"), keyspace.Int(int64(n.offset)),
			keyspace.Bulk("health"), keyspace.Bulk(health),
		)
	}
	c.reply(keyspace.Array(keyspace.Map(
		keyspace.Bulk("slots"), keyspace.Array(keyspace.Zero, keyspace.Int(keyspace.ClusterSlots-1)),
		keyspace.Bulk("nodes"), keyspace.Array(nodes...),
	)))
}

// CLUSTER NODES, one line per node: "<id> <ip:port@cport> <flags> <master>
// <ping-sent> <pong-recv> <config-epoch> <link-state> [<slots>]". The bus
// port is 0, there being no cluster bus; a node in touch answered its last
// ping just now; every node reports the current term as its epoch.
func cmdClusterNodes(c *conn, args [][]byte) {
	cv := c.clusterView()
	masterID := "-"
	if m, known := cv.master(); known {
		masterID = m.id
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	var b strings.Builder
	for _, n := range cv.nodes {
		var flags []string
		if n.myself {
			flags = append(flags, "myself")
		}
		of, pong, link := masterID, now, "connected"
		switch {
		case n.master:
			flags, of = append(flags, "master"), "-"
		case masterID == "-":
			flags = append(flags, "master") // no master known: a node with no slots
		default:
			flags = append(flags, "slave")
		}
		if n.failing {
			flags, pong, link = append(flags, "fail?"), "0", "disconnected"
		}
		if n.myself {
			pong = "0"
		}
		b.WriteString(n.id + " " + n.host + ":" + strconv.FormatInt(n.portInt(), 10) + "@0 " + strings.Join(flags, ",") + " " +
			of + " 0 " + pong + " " + strconv.FormatUint(cv.term, 10) + " " + link)
		if n.master {
			b.WriteString(" 0-" + strconv.Itoa(keyspace.ClusterSlots-1))
		}
		b.WriteByte('\n')
	}
	c.reply(keyspace.Reply{Kind: keyspace.KindVerbatim, Str: b.String()})
}

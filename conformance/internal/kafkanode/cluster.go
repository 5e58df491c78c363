package kafkanode

// The cluster: three combined broker+controller nodes with a static quorum
// of three voters (controller.quorum.voters), so that killing or stopping
// any one node leaves a majority and the cluster carries on; broker.rack
// az-a, az-b, az-c; internal and new topics replicated three times
// (min.insync.replicas 2); the rack-aware replica selector.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Racks are the racks of the cluster's nodes, node 1 first.
var Racks = []string{"az-a", "az-b", "az-c"}

// ClusterConfig is what a caller adds to every node of the cluster.
type ClusterConfig struct {
	// Ports names further free ports of every node (a listener's): @NAME@
	// in Extra and FormatArgs is the node's own.
	Ports []string
	// Extra returns lines appended to node id's config.
	Extra func(id int) []string
	// FormatArgs are added to every node's StorageTool format.
	FormatArgs []string
	// Logf, when set, is told when a start is retried.
	Logf func(format string, a ...any)
}

// NodeConfig turns the single-node template into node id of the cluster
// whose controller quorum is voters (id@host:port,...). A later key
// overrides the template's.
func NodeConfig(id int, voters, rack string) []string {
	return []string{
		"node.id=" + strconv.Itoa(id),
		"controller.quorum.bootstrap.servers=",
		"controller.quorum.voters=" + voters,
		"broker.rack=" + rack,
		"offsets.topic.replication.factor=3",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
		"share.coordinator.state.topic.replication.factor=3",
		"share.coordinator.state.topic.min.isr=2",
		"default.replication.factor=3",
		"min.insync.replicas=2",
		"replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
		// A restarted node registers again only once the controller has
		// expired its killed incarnation's session: 2 s, not 9 s, keeps
		// restarts short. It is also how long a killed node keeps its
		// leaderships before the controller fences it.
		"broker.heartbeat.interval.ms=500",
		"broker.session.timeout.ms=2000",
	}
}

// clusterNodes returns the cluster's nodes, one per rack, not formatted:
// node i+1 in dir/node-<i+1>, on ports[i*per:] (broker, controller, then
// cc.Ports), per being 2+len(cc.Ports).
func clusterNodes(setup Setup, dir string, ports []int, clusterID string, cc ClusterConfig) []*Node {
	n, per := len(Racks), 2+len(cc.Ports)
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[i*per+1]))
	}
	nodes := make([]*Node, 0, n)
	for i := range n {
		b := &Node{Setup: setup, Name: fmt.Sprintf("node %d (%s)", i+1, Racks[i]), Dir: filepath.Join(dir, fmt.Sprintf("node-%d", i+1)),
			BrokerPort: ports[i*per], ControllerPort: ports[i*per+1], Named: map[string]int{},
			ClusterID: clusterID, FormatMode: []string{}, FormatArgs: cc.FormatArgs}
		for j, name := range cc.Ports {
			b.Named[name] = ports[i*per+2+j]
		}
		b.Extra = NodeConfig(i+1, strings.Join(voters, ","), Racks[i])
		if cc.Extra != nil {
			b.Extra = append(b.Extra, cc.Extra(i+1)...)
		}
		nodes = append(nodes, b)
	}
	return nodes
}

// StartCluster formats and starts one node per rack of Racks, node i in
// dir/node-<i>, and returns once every node answers and the cluster lists
// them all. When a port was taken before a node bound it, it tries again
// on new ports (three attempts in all). On error it returns the nodes of
// the last attempt too, killed, for their logs. It gives up when ctx
// ends.
func StartCluster(ctx context.Context, setup Setup, dir string, cc ClusterConfig) ([]*Node, error) {
	per := 2 + len(cc.Ports)
	for attempt := 1; ; attempt++ {
		ports, err := FreePorts(len(Racks) * per)
		if err != nil {
			return nil, err
		}
		clusterID, err := NewClusterID(rand.Reader)
		if err != nil {
			return nil, err
		}
		nodes := clusterNodes(setup, dir, ports, clusterID, cc)
		err = startNodes(ctx, nodes)
		if err == nil {
			return nodes, nil
		}
		taken := false
		for _, b := range nodes {
			taken = taken || b.LogContains("Address already in use")
			_ = b.Kill()
		}
		if attempt < 3 && taken && ctx.Err() == nil {
			if cc.Logf != nil {
				cc.Logf("cluster: a port was taken before a node bound it; retrying with new ports")
			}
			continue
		}
		return nodes, fmt.Errorf("cluster: %w", err)
	}
}

// startNodes formats and launches every node, then waits until each
// answers and the cluster's metadata lists them all.
func startNodes(ctx context.Context, nodes []*Node) error {
	for _, b := range nodes {
		if err := b.Format(); err != nil {
			return err
		}
	}
	for _, b := range nodes {
		if err := b.Launch(); err != nil {
			return err
		}
	}
	errs := make(chan error, len(nodes))
	for _, b := range nodes {
		go func() { errs <- b.waitReady(ctx) }()
	}
	var all []error
	for range nodes {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyBudget)
	defer cancel()
	var addrs []string
	for _, b := range nodes {
		addrs = append(addrs, b.Addrs()...)
	}
	if err := waitAnswer(ctx, addrs, len(nodes)); err != nil {
		return fmt.Errorf("waiting for every node to register: %w", err)
	}
	return nil
}

// StopAll stops the running nodes at once, each with a controlled shutdown
// of at most budget (then SIGKILL), and returns what went wrong.
func StopAll(nodes []*Node, budget time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, b := range nodes {
		wg.Go(func() { errs[i] = b.Terminate(budget) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

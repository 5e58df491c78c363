package iq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/describegroups"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/azkafka/azkafka/internal/frameguard"
	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// EnvAZTag names the client tag (Kafka Streams' client.tag.<key>) that
// gives an instance's availability zone when its members set no
// client.rack; read by NewClusterSource (through WithLookupEnv's lookup)
// unless WithAZTag is given. Set but blank is an error. Default:
// DefaultAZTag.
const EnvAZTag = "AZKAFKA_IQ_AZ_TAG"

// DefaultAZTag is the client tag read for an instance's zone: "az", as in
// client.tag.az=eu-west-1a.
const DefaultAZTag = "az"

// DefaultClusterPollTimeout bounds one poll of a ClusterSource: 10s.
const DefaultClusterPollTimeout = 10 * time.Second

// WithTransport sets the kafka-go transport the source talks to the
// brokers with: pass sdk.NewTransport(&kafka.Transport{TLS: ..., SASL:
// ...}) for TLS, SASL and the SDK's client ID. Default: a kafka.Transport
// with client ID "azkafka-iq", closed by Close. The default and the SDK's
// Transports read through the SDK's frame guard (see "Misbehaving brokers"
// in package sdk; its limit is $AZKAFKA_MAX_RESPONSE_BYTES); a
// kafka.Transport of another origin is used as it is. Taken by
// NewClusterSource.
func WithTransport(rt kafka.RoundTripper) Option {
	return option{"WithTransport", forCluster, func(c *config) { c.transport = rt }}
}

// WithStoreTopics names the source topics of store: those upstream of the
// processors that use the store (Java's InternalTopologyBuilder), with
// repartition topics by their full name (<application.id>-...-repartition).
// It overrides what the source finds in the group, and is needed when the
// group cannot tell (a subtopology whose source topics have different
// partition counts; see ErrStoreTopicsUnknown). May be given once per
// store. Taken by NewClusterSource.
func WithStoreTopics(store string, topics ...string) Option {
	topics = slices.Clone(topics)
	return option{"WithStoreTopics", forCluster, func(c *config) {
		if c.storeTopics == nil {
			c.storeTopics = map[string][]string{}
		}
		c.storeTopics[store] = topics
	}}
}

// WithAZTag sets the client tag that gives an instance's zone when it sets
// no client.rack. Default: EnvAZTag, else DefaultAZTag ("az"). Taken by
// NewClusterSource.
func WithAZTag(key string) Option {
	return option{"WithAZTag", forCluster, func(c *config) { c.azTag = &key }}
}

// WithLagBounds turns the standby lag bounds on or off; they cost one
// ListOffsets round per poll. Default: on. Taken by NewClusterSource.
func WithLagBounds(on bool) Option {
	return option{"WithLagBounds", forCluster, func(c *config) { c.lagBounds = on }}
}

// clusterAPI is what a ClusterSource asks the cluster.
type clusterAPI interface {
	describeGroup(ctx context.Context, group string) (*describegroups.ResponseGroup, error)
	describeStreamsGroup(ctx context.Context, group string) (*kmsg.StreamsGroupDescribeResponseGroup, error)
	topics(ctx context.Context) (map[string]int, error)
	endOffsets(ctx context.Context, tps []wire.TopicPartition) (map[wire.TopicPartition]int64, error)
}

// ClusterSource is a Source that reads a Kafka Streams application's
// routing from its consumer group on the brokers, with no code on the Java
// side. Each poll describes the group named by the application.id
// (DescribeGroups), decodes its members' Kafka Streams assignment and
// subscription data, reads topic partition counts (Metadata) and, for the
// standby lag bounds, changelog end offsets (ListOffsets).
//
// It yields the same model as HTTPSource: instances with their zone (the
// member's client.rack, else a client tag, see WithAZTag), active and
// standby partitions per store, and for standbys an upper bound of their
// lag (Lag.Bound). A store's source topics come from its changelog topic
// (<application.id>-<store>-changelog) and the subtopology whose task count
// matches it; when the group cannot tell which topics feed a store, Route
// on it fails with ErrStoreTopicsUnknown and WithStoreTopics is the way out.
//
// Both rebalance protocols are read: classic (group.protocol=classic, via
// DescribeGroups) and streams (KIP-1071, group.protocol=streams, via
// StreamsGroupDescribe, tried when DescribeGroups does not find the group).
// On the streams protocol lags are unknown. When a poll fails the last good
// routing is kept. It is safe for concurrent use.
type ClusterSource struct {
	appID       string
	brokers     []string
	interval    time.Duration
	timeout     time.Duration
	transport   kafka.RoundTripper
	ownTrans    *kafka.Transport
	storeTopics map[string][]string
	azTag       string
	lagBounds   bool
	maxResponse int // the frame guard's limit; 0: its default
	// refused is the last response the frame guard of the source's own
	// transport refused: kafka-go reports some of them as a broker not
	// available, so poll errors name it.
	refused atomic.Pointer[frameguard.Error]
	logger  *slog.Logger
	api     clusterAPI

	snap atomic.Pointer[Snapshot]
	info atomic.Pointer[GroupInfo]
	poll *poller
}

// NewClusterSource returns a source that reads the group of the Kafka
// Streams application applicationID from the cluster at brokers
// (host:port, at least one). It does not poll until Start or Refresh. It
// reads EnvAZTag and AZKAFKA_MAX_RESPONSE_BYTES (the frame guard's limit,
// as the SDK reads it) through WithLookupEnv's lookup; a malformed or
// blank variable is an error that names it, and so is an option
// NewClusterSource does not take.
func NewClusterSource(brokers []string, applicationID string, opts ...Option) (*ClusterSource, error) {
	if len(brokers) == 0 {
		return nil, errors.New("iq: NewClusterSource: no broker address")
	}
	for _, b := range brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return nil, fmt.Errorf("iq: NewClusterSource: broker %s: want host:port", quote(b))
		}
	}
	if applicationID == "" {
		return nil, errors.New("iq: NewClusterSource: empty application.id")
	}
	cfg := newConfig()
	cfg.interval, cfg.timeout, cfg.lagBounds = DefaultPollInterval, DefaultClusterPollTimeout, true
	if err := cfg.apply(forCluster, opts); err != nil {
		return nil, err
	}
	s := &ClusterSource{
		appID:       applicationID,
		brokers:     slices.Clone(brokers),
		interval:    cfg.interval,
		timeout:     cfg.timeout,
		transport:   cfg.transport,
		storeTopics: cfg.storeTopics,
		azTag:       DefaultAZTag,
		lagBounds:   cfg.lagBounds,
		logger:      cfg.logger,
		api:         cfg.api,
	}
	if cfg.azTag != nil {
		s.azTag = *cfg.azTag
	} else if v, ok, err := cfg.env(EnvAZTag); err != nil {
		return nil, err
	} else if ok {
		s.azTag = v
	}
	if s.interval <= 0 || s.timeout <= 0 {
		return nil, fmt.Errorf("iq: NewClusterSource: interval %s and timeout %s must be positive", max(s.interval, 0), max(s.timeout, 0))
	}
	for store, topics := range s.storeTopics {
		if store == "" || len(topics) == 0 || slices.Contains(topics, "") {
			return nil, fmt.Errorf("iq: WithStoreTopics(%s, %s): want a store name and at least one topic name", quote(store), quote(strings.Join(topics, ",")))
		}
	}
	if v, ok, err := cfg.env(frameguard.LimitVar); err != nil {
		return nil, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 64<<10 {
			return nil, fmt.Errorf("iq: NewClusterSource: %s=%s: want an integer of at least 65536", frameguard.LimitVar, quote(v))
		}
		s.maxResponse = n
	}
	if s.transport == nil {
		// Its connections go through the frame guard, as the SDK's do.
		dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		s.ownTrans = &kafka.Transport{ClientID: "azkafka-iq", Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return frameguard.Wrap(c, addr, s.maxResponse, s.noteRefusal), nil
		}}
		s.transport = s.ownTrans
	}
	if s.api == nil {
		s.api = &kafkaGoCluster{
			client:      &kafka.Client{Addr: kafka.TCP(s.brokers...), Transport: s.transport},
			maxResponse: s.maxResponse,
		}
	}
	s.poll = newPoller("group", s.refresh)
	s.poll.interval, s.poll.logger = s.interval, s.logger
	return s, nil
}

func (s *ClusterSource) noteRefusal(e *frameguard.Error) { s.refused.Store(e) }

// Snapshot returns the last good routing, or nil before the first
// successful poll.
func (s *ClusterSource) Snapshot() *Snapshot { return s.snap.Load() }

// Group returns what the last good poll read from the group, or nil.
func (s *ClusterSource) Group() *GroupInfo { return s.info.Load() }

// LastPoll returns the time of the last successful poll (zero before the
// first) and the error of the last poll (nil if it succeeded).
func (s *ClusterSource) LastPoll() (lastOK time.Time, lastErr error) { return s.poll.last() }

// Start polls once right away and then every interval in a goroutine until
// Close. Calling it more than once has no effect.
func (s *ClusterSource) Start() { s.poll.start() }

// Close stops polling, waits for the poller to exit and closes the idle
// connections of the transport it made. It is safe to call more than
// once, and without Start.
func (s *ClusterSource) Close() error {
	s.poll.close()
	if s.ownTrans != nil {
		s.ownTrans.CloseIdleConnections()
	}
	return nil
}

// Refresh polls once, synchronously, and installs the new routing if the
// poll succeeded. Concurrent calls share one poll.
func (s *ClusterSource) Refresh(ctx context.Context) error { return s.poll.refresh(ctx) }

func (s *ClusterSource) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.refused.Store(nil)
	g, err := s.api.describeGroup(ctx, s.appID)
	if err != nil {
		if r := s.refused.Load(); r != nil && !strings.Contains(err.Error(), r.Reason) {
			return fmt.Errorf("iq: group %s: DescribeGroups: %w; the last response refused: %w", quote(s.appID), err, r)
		}
		return fmt.Errorf("iq: group %s: DescribeGroups: %w", quote(s.appID), err)
	}
	topics, err := s.api.topics(ctx)
	if err != nil {
		return fmt.Errorf("iq: group %s: Metadata: %w", quote(s.appID), err)
	}
	cfg := group.Config{AppID: s.appID, Topics: topics, StoreTopics: s.storeTopics, AZTag: s.azTag}
	v, err := group.Classic(g, cfg)
	if errors.Is(err, ErrGroupNotFound) {
		// A group on the streams protocol is invisible to DescribeGroups.
		sg, serr := s.api.describeStreamsGroup(ctx, s.appID)
		switch {
		case serr != nil:
			err = fmt.Errorf("%w; as a streams-protocol group: %v", err, serr)
		case sg.ErrorCode != kerr.GroupIDNotFound.Code: // the classic answer stands
			v, err = group.Streams(sg, cfg)
		}
	}
	if err != nil {
		return err
	}
	// On the streams protocol the group holds no offsets of its members
	// (task offsets are empty on 4.3): lags stay unknown.
	if s.lagBounds && v.Info.Protocol == "classic" {
		if targets := v.LagTargets(topics); len(targets) > 0 {
			ends, err := s.api.endOffsets(ctx, targets)
			if err != nil {
				// Routing does not need lags: keep it, with unknown lags.
				s.logger.Warn("iq: changelog end offsets unknown; standby lags unknown this poll", "group", s.appID, "error", err)
			}
			v.ApplyLagBounds(topics, ends)
		}
	}
	snap, err := NewSnapshot(groupMetadata(v.Routing))
	if err != nil {
		return fmt.Errorf("iq: group %s: %w", quote(s.appID), err)
	}
	s.snap.Store(snap)
	info := groupInfo(v.Info)
	s.info.Store(&info)
	for store, why := range v.Routing.UnmappedStores {
		s.logger.Debug("iq: store not routable from the group", "group", s.appID, "store", store, "reason", why)
	}
	return nil
}

// kafkaGoCluster asks the cluster through kafka-go's client and protocol
// layer, so the source adds no dependency to the module.
type kafkaGoCluster struct {
	client      *kafka.Client
	maxResponse int // the frame guard's limit on its own connections
}

func (k *kafkaGoCluster) describeGroup(ctx context.Context, group string) (*describegroups.ResponseGroup, error) {
	m, err := k.client.Transport.RoundTrip(ctx, k.client.Addr, &describegroups.Request{Groups: []string{group}})
	if err != nil {
		return nil, err
	}
	resp, ok := m.(*describegroups.Response)
	if !ok {
		return nil, fmt.Errorf("unexpected response %T", m)
	}
	for i := range resp.Groups {
		if resp.Groups[i].GroupID == group {
			return &resp.Groups[i], nil
		}
	}
	return nil, fmt.Errorf("the response does not list group %s", quote(group))
}

func (k *kafkaGoCluster) topics(ctx context.Context) (map[string]int, error) {
	resp, err := k.client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Error == nil {
			out[t.Name] = len(t.Partitions)
		}
	}
	return out, nil
}

func (k *kafkaGoCluster) endOffsets(ctx context.Context, tps []wire.TopicPartition) (map[wire.TopicPartition]int64, error) {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, tp := range tps {
		req.Topics[tp.Topic] = append(req.Topics[tp.Topic], kafka.LastOffsetOf(tp.Partition))
	}
	resp, err := k.client.ListOffsets(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make(map[wire.TopicPartition]int64, len(tps))
	var errs []error
	for t, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", t, p.Partition, p.Error))
				continue
			}
			out[wire.TopicPartition{Topic: t, Partition: p.Partition}] = p.LastOffset
		}
	}
	return out, errors.Join(errs...)
}

// describeStreamsGroup finds the group's coordinator with kafka-go and
// asks it on a connection of the source's own (see package wire: kafka-go
// does not know StreamsGroupDescribe).
func (k *kafkaGoCluster) describeStreamsGroup(ctx context.Context, group string) (*kmsg.StreamsGroupDescribeResponseGroup, error) {
	fc, err := k.client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err != nil {
		return nil, fmt.Errorf("FindCoordinator: %w", err)
	}
	if fc.Error != nil {
		return nil, fmt.Errorf("FindCoordinator: %w", fc.Error)
	}
	if fc.Coordinator == nil {
		return nil, errors.New("FindCoordinator: no coordinator")
	}
	addr := net.JoinHostPort(fc.Coordinator.Host, strconv.Itoa(fc.Coordinator.Port))
	conn, err := wire.Dial(ctx, k.transport(), addr, k.clientID(), k.maxResponse)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return wire.DescribeStreamsGroup(conn, addr, k.clientID(), group)
}

// transport returns the source's kafka.Transport, nil for another
// RoundTripper: the own connection is then plain TCP.
func (k *kafkaGoCluster) transport() *kafka.Transport {
	t, _ := k.client.Transport.(*kafka.Transport)
	return t
}

func (k *kafkaGoCluster) clientID() string {
	if t := k.transport(); t != nil && t.ClientID != "" {
		return t.ClientID
	}
	return "azkafka-iq"
}

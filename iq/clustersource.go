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
	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/iq/internal/group"
	"github.com/azkafka/azkafka/iq/internal/wire"
)

// Defaults of NewClusterSource.
const (
	// defaultAZTag is the client tag read for an instance's zone, as in
	// client.tag.az=eu-west-1a.
	defaultAZTag              = "az"
	defaultClusterPollTimeout = 10 * time.Second
)

// clusterVars is the table of NewClusterSource's own variables (see
// clientVars).
var clusterVars = []settings.Var[config]{
	{Name: "AZKAFKA_IQ_AZ_TAG", Default: settings.Code(defaultAZTag), Option: "WithAZTag",
		Doc: "`iq.NewClusterSource`: the Kafka Streams client tag giving an instance's zone when it sets no `client.rack` (`client.tag.az=us-east-1a`). `iq.WithAZTag` wins.",
		Set: func(c *config, v string) error { c.azTag = v; return nil }},
}

// clusterReads is what NewClusterSource reads: its variables, and
// AZKAFKA_MAX_RESPONSE_BYTES through the row of package sdk's table that
// holds it (registered and documented there), parsed as the SDK parses it.
var clusterReads = append(slices.Clone(clusterVars),
	frameguard.LimitRow[config]("WithTransport", "", func(c *config, n int) { c.maxResponse = n }))

func init() {
	settings.Register("iq", clusterVars, func() config { return config{} })
}

// WithTransport sets the kafka-go transport the source talks to the
// brokers with: pass sdk.NewTransport(&kafka.Transport{TLS: ..., SASL:
// ...}) for TLS, SASL and the SDK's client ID. Default: a kafka.Transport
// with client ID "azkafka-iq", closed by Close. The default and the SDK's
// Transports read through the SDK's frame guard (see "Misbehaving brokers"
// in package sdk; the default's limit is AZKAFKA_MAX_RESPONSE_BYTES, as
// the SDK reads it); a kafka.Transport of another origin is used as it
// is. Taken by NewClusterSource.
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
// no client.rack. Default: AZKAFKA_IQ_AZ_TAG, else "az" (as in
// client.tag.az=us-east-1a). Taken by NewClusterSource.
func WithAZTag(key string) Option {
	return option{"WithAZTag", forCluster, func(c *config) { c.azTag = key }}
}

// clusterAPI is what a cluster source asks the cluster.
type clusterAPI interface {
	describeGroup(ctx context.Context, group string) (*describegroups.ResponseGroup, error)
	describeStreamsGroup(ctx context.Context, group string) (*kmsg.StreamsGroupDescribeResponseGroup, error)
	topics(ctx context.Context) (map[string]int, error)
	endOffsets(ctx context.Context, tps []wire.TopicPartition) (map[wire.TopicPartition]int64, error)
}

// clusterSource reads a Kafka Streams application's routing from its
// group on the brokers (see NewClusterSource).
type clusterSource struct {
	appID       string
	timeout     time.Duration
	ownTrans    *kafka.Transport
	storeTopics map[string][]string
	azTag       string
	maxResponse int // the frame guard's limit; 0: its default
	// refused is the last response the frame guard of the source's own
	// transport refused: kafka-go reports some of them as a broker not
	// available, so poll errors name it.
	refused atomic.Pointer[frameguard.Error]
	logger  *slog.Logger
	api     clusterAPI

	snap atomic.Pointer[snapshot]
	info atomic.Pointer[iqinspect.Group]
	poll *poller
}

// NewClusterSource returns a Source that reads the routing of the Kafka
// Streams application applicationID from its group on the cluster at
// brokers (host:port, at least one), with no code on the Java side (see
// "Routing from the cluster" in the package doc). Each poll describes the
// group named by the application.id (DescribeGroups; StreamsGroupDescribe
// for a group on the streams protocol), decodes its members' Kafka
// Streams assignment and subscription data, and reads topic partition
// counts (Metadata) and, for the standby lag bounds of the classic
// protocol, changelog end offsets (ListOffsets). It does not poll until
// Start or Refresh.
//
// It reads AZKAFKA_IQ_AZ_TAG and AZKAFKA_MAX_RESPONSE_BYTES (the frame
// guard's limit, as the SDK reads it) through WithLookupEnv's lookup; a
// malformed or blank variable is an error that names it, and so is an
// option NewClusterSource does not take.
func NewClusterSource(brokers []string, applicationID string, opts ...Option) (*Source, error) {
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
	cfg.interval, cfg.timeout, cfg.azTag = defaultPollInterval, defaultClusterPollTimeout, defaultAZTag
	if err := cfg.load(forCluster, clusterReads, opts); err != nil {
		return nil, err
	}
	if cfg.interval <= 0 || cfg.timeout <= 0 {
		return nil, fmt.Errorf("iq: NewClusterSource: interval %s and timeout %s must be positive", max(cfg.interval, 0), max(cfg.timeout, 0))
	}
	for store, topics := range cfg.storeTopics {
		if store == "" || len(topics) == 0 || slices.Contains(topics, "") {
			return nil, fmt.Errorf("iq: WithStoreTopics(%s, %s): want a store name and at least one topic name", quote(store), quote(strings.Join(topics, ",")))
		}
	}
	s := &clusterSource{
		appID:       applicationID,
		timeout:     cfg.timeout,
		storeTopics: cfg.storeTopics,
		azTag:       cfg.azTag,
		maxResponse: cfg.maxResponse,
		logger:      cfg.logger,
		api:         cfg.api,
	}
	transport := cfg.transport
	if transport == nil {
		// Its connections go through the frame guard, as the SDK's do.
		dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		s.ownTrans = &kafka.Transport{ClientID: "azkafka-iq", Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return frameguard.Wrap(c, addr, s.maxResponse, s.noteRefusal), nil
		}}
		transport = s.ownTrans
	}
	if s.api == nil {
		s.api = &kafkaGoCluster{
			client:      &kafka.Client{Addr: kafka.TCP(slices.Clone(brokers)...), Transport: transport},
			maxResponse: s.maxResponse,
		}
	}
	s.poll = newPoller("group", cfg.interval, s.logger, s.pollOnce)
	return &Source{impl: s}, nil
}

func (s *clusterSource) noteRefusal(e *frameguard.Error) { s.refused.Store(e) }

func (s *clusterSource) snapshot() *snapshot                     { return s.snap.Load() }
func (s *clusterSource) start()                                  { s.poll.start() }
func (s *clusterSource) refresh(ctx context.Context) error       { return s.poll.refresh(ctx) }
func (s *clusterSource) last() (lastOK time.Time, lastErr error) { return s.poll.last() }

func (s *clusterSource) close() {
	s.poll.close()
	if s.ownTrans != nil {
		s.ownTrans.CloseIdleConnections()
	}
}

// pollOnce is one poll: it installs the new routing if it succeeded.
func (s *clusterSource) pollOnce(ctx context.Context) error {
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
	if v.Info.Protocol == "classic" {
		if targets := v.LagTargets(topics); len(targets) > 0 {
			ends, err := s.api.endOffsets(ctx, targets)
			if err != nil {
				// Routing does not need lags: keep it, with unknown lags.
				s.logger.Warn("iq: changelog end offsets unknown; standby lags unknown this poll", "group", s.appID, "error", err)
			}
			v.ApplyLagBounds(topics, ends)
		}
	}
	snap, err := newSnapshot(groupMetadata(v.Routing))
	if err != nil {
		return fmt.Errorf("iq: group %s: %w", quote(s.appID), err)
	}
	s.snap.Store(snap)
	s.info.Store(groupInfo(v.Info))
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

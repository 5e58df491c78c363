package iq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// documentVersion is the version of the metadata document this package
// reads.
const documentVersion = 1

// document is the JSON document one Kafka Streams instance serves at its
// metadata endpoint (see the package documentation for the schema and a
// Java handler). It carries the application's view of every instance
// (KafkaStreams.metadataForAllStreamsClients) and what only the serving
// instance knows: its own zone and its store partition lags
// (KafkaStreams.allLocalStorePartitionLags).
type document struct {
	Version int `json:"version"`
	// Self is the serving instance's application.server.
	Self docHost `json:"self"`
	// AZ is the serving instance's availability zone; may be empty.
	AZ string `json:"az,omitempty"`
	// State is the serving instance's KafkaStreams.State, e.g. "RUNNING".
	State string `json:"state"`
	// Stores maps each store to its source topics.
	Stores map[string][]string `json:"stores"`
	// Topics maps each source topic to its partition count.
	Topics map[string]int `json:"topics"`
	// Instances is metadataForAllStreamsClients.
	Instances []documentInstance `json:"instances"`
	// Lags maps store, then partition (a decimal string), to the serving
	// instance's own lag.
	Lags map[string]map[string]documentLag `json:"lags"`
}

type docHost struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// documentInstance is one StreamsMetadata in a document. Partitions map a
// topic to its partition numbers.
type documentInstance struct {
	Host              string           `json:"host"`
	Port              int              `json:"port"`
	ActiveStores      []string         `json:"activeStores"`
	ActivePartitions  map[string][]int `json:"activePartitions"`
	StandbyStores     []string         `json:"standbyStores"`
	StandbyPartitions map[string][]int `json:"standbyPartitions"`
}

// documentLag is one LagInfo: offsets of the local copy and the changelog end.
type documentLag struct {
	Current int64 `json:"current"`
	End     int64 `json:"end"`
	Lag     int64 `json:"lag"`
}

// parseDocument decodes and validates a metadata document read from source
// (a URL or file name, used in errors). Unknown fields are ignored, so
// newer servers may add some. Errors name source and the offending field.
func parseDocument(source string, body []byte) (*document, error) {
	var d document
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("iq: %s: invalid metadata JSON: %w", source, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("iq: %s: trailing data after the metadata JSON object", source)
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("iq: %s: %w", source, err)
	}
	return &d, nil
}

func (d *document) validate() error {
	if d.Version != documentVersion {
		return fmt.Errorf("field version: got %d, want %d", d.Version, documentVersion)
	}
	if err := checkHost("self", d.Self.Host, d.Self.Port); err != nil {
		return err
	}
	if d.State == "" {
		return errors.New("field state: missing")
	}
	for store, topics := range d.Stores {
		if store == "" {
			return errors.New("field stores: empty store name")
		}
		if len(topics) == 0 {
			return fmt.Errorf("field stores[%s]: no source topics", quote(store))
		}
		for i, t := range topics {
			if t == "" {
				return fmt.Errorf("field stores[%s][%d]: empty topic name", quote(store), i)
			}
		}
	}
	for t, n := range d.Topics {
		if t == "" {
			return errors.New("field topics: empty topic name")
		}
		if n <= 0 || n > maxPartitions {
			return fmt.Errorf("field topics[%s]: partition count %d out of range 1..%d", quote(t), n, maxPartitions)
		}
	}
	seen := make(map[HostInfo]bool, len(d.Instances))
	for i, in := range d.Instances {
		f := fmt.Sprintf("instances[%d]", i)
		if err := checkHost(f, in.Host, in.Port); err != nil {
			return err
		}
		h := HostInfo{in.Host, in.Port}
		if seen[h] {
			return fmt.Errorf("field %s: duplicate instance %s", f, h)
		}
		seen[h] = true
		for _, ps := range []struct {
			name string
			m    map[string][]int
		}{{"activePartitions", in.ActivePartitions}, {"standbyPartitions", in.StandbyPartitions}} {
			for t, parts := range ps.m {
				for j, p := range parts {
					if p < 0 || p >= maxPartitions {
						return fmt.Errorf("field %s.%s[%s][%d]: partition %d out of range", f, ps.name, quote(t), j, p)
					}
				}
			}
		}
	}
	for store, m := range d.Lags {
		for ps, l := range m {
			p, err := strconv.Atoi(ps)
			if err != nil || p < 0 || p >= maxPartitions {
				return fmt.Errorf("field lags[%s][%s]: not a partition number", quote(store), quote(ps))
			}
			if l.Current < 0 || l.End < 0 || l.Lag < 0 {
				return fmt.Errorf("field lags[%s][%s]: negative offset", quote(store), quote(ps))
			}
		}
	}
	return nil
}

// maxPartitions bounds partition numbers and counts in documents, so a
// hostile document cannot make NewSnapshot allocate without bound.
const maxPartitions = 1 << 16

func checkHost(field, host string, port int) error {
	if host == "" {
		return fmt.Errorf("field %s.host: missing", field)
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("field %s.port: %d out of range 1..65535", field, port)
	}
	return nil
}

// instance returns the document's view of one instance without AZ or lags.
func (di documentInstance) instance() Instance {
	return Instance{
		HostInfo:          HostInfo{di.Host, di.Port},
		ActiveStores:      di.ActiveStores,
		ActivePartitions:  topicPartitions(di.ActivePartitions),
		StandbyStores:     di.StandbyStores,
		StandbyPartitions: topicPartitions(di.StandbyPartitions),
	}
}

func topicPartitions(m map[string][]int) []TopicPartition {
	topics := make([]string, 0, len(m))
	for t := range m {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var out []TopicPartition
	for _, t := range topics {
		for _, p := range m[t] {
			out = append(out, TopicPartition{t, p})
		}
	}
	return out
}

// lags converts the document's lags to Instance.Lags.
func (d *document) lags() map[string]map[int]Lag {
	out := make(map[string]map[int]Lag, len(d.Lags))
	for store, m := range d.Lags {
		lm := make(map[int]Lag, len(m))
		for ps, l := range m {
			p, _ := strconv.Atoi(ps) // validated
			lm[p] = Lag{Current: l.Current, End: l.End, Lag: l.Lag}
		}
		out[store] = lm
	}
	return out
}

// mergeDocuments builds Metadata from the documents of several instances of
// one application: stores, topics and the instance list come from primary
// (one instance's view of all); each instance's AZ and lags come from that
// instance's own document among docs. Instances without a document have
// unknown AZ and lags.
func mergeDocuments(primary *document, docs []*document) Metadata {
	own := make(map[HostInfo]*document, len(docs))
	for _, d := range docs {
		own[HostInfo{d.Self.Host, d.Self.Port}] = d
	}
	md := Metadata{
		StoreSourceTopics: primary.Stores,
		TopicPartitions:   primary.Topics,
		Instances:         make([]Instance, 0, len(primary.Instances)),
	}
	for _, di := range primary.Instances {
		in := di.instance()
		if d := own[in.HostInfo]; d != nil {
			in.AZ = d.AZ
			in.Lags = d.lags()
		}
		md.Instances = append(md.Instances, in)
	}
	return md
}

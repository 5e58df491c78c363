package iq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of HTTPSource.
const (
	// DefaultPollInterval is how often HTTPSource polls: 5s.
	DefaultPollInterval = 5 * time.Second
	// DefaultPollTimeout bounds one poll of one instance: 2s.
	DefaultPollTimeout = 2 * time.Second
	// DefaultMaxBodyBytes caps a metadata document: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
)

// WithMaxBodyBytes caps the size of a document; a larger one is an error.
// It must be positive. Default: DefaultMaxBodyBytes (1 MiB). Taken by
// NewHTTPSource.
func WithMaxBodyBytes(n int64) Option {
	return option{"WithMaxBodyBytes", forHTTP, func(c *config) { c.maxBody = n }}
}

// WithHTTPClient sets the HTTP client; it must not be nil. Default: a
// client with no timeout of its own (WithPollTimeout bounds each request),
// whose idle connections Close closes. Taken by NewHTTPSource.
func WithHTTPClient(hc *http.Client) Option {
	return option{"WithHTTPClient", forHTTP, func(c *config) { c.httpClient = hc }}
}

// WithPeerDiscovery turns polling of the other instances on or off. When on,
// each poll also fetches the document of every instance listed in the last
// good metadata, at the seed URL's scheme and path with the instance's
// application.server as host:port, because lags and zones are known only
// by each instance itself. Default: on. Taken by NewHTTPSource.
func WithPeerDiscovery(on bool) Option {
	return option{"WithPeerDiscovery", forHTTP, func(c *config) { c.discover = on }}
}

// HTTPSource is a Source that polls the metadata endpoint of a Kafka
// Streams application. Each poll fetches the seed URLs and (with peer
// discovery) every known instance concurrently, validates each document and
// merges them: the instance list comes from the first
// document in state RUNNING, seeds before discovered instances (else from
// the first document received), each instance's zone and lags from its own
// document. When a whole poll fails
// the last good metadata is kept. It is safe for concurrent use.
type HTTPSource struct {
	seeds     []*url.URL
	interval  time.Duration
	timeout   time.Duration
	maxBody   int64
	client    *http.Client
	ownClient bool
	discover  bool
	logger    *slog.Logger

	snap atomic.Pointer[Snapshot]
	poll *poller
}

// NewHTTPSource returns a source that polls the given metadata URLs (at
// least one, http or https). It does not poll until Start or Refresh.
func NewHTTPSource(urls []string, opts ...Option) (*HTTPSource, error) {
	if len(urls) == 0 {
		return nil, errors.New("iq: NewHTTPSource: no metadata URL")
	}
	defaultClient := &http.Client{}
	cfg := newConfig()
	cfg.interval, cfg.timeout = DefaultPollInterval, DefaultPollTimeout
	cfg.maxBody, cfg.httpClient, cfg.discover = DefaultMaxBodyBytes, defaultClient, true
	s := &HTTPSource{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("iq: metadata URL %s: want http://host:port/path", quote(raw))
		}
		s.seeds = append(s.seeds, u)
	}
	if err := cfg.apply(forHTTP, opts); err != nil {
		return nil, err
	}
	s.interval, s.timeout, s.maxBody = cfg.interval, cfg.timeout, cfg.maxBody
	s.client, s.discover, s.logger = cfg.httpClient, cfg.discover, cfg.logger
	s.ownClient = s.client == defaultClient
	if s.client == nil {
		return nil, errors.New("iq: NewHTTPSource: nil HTTP client")
	}
	if s.interval <= 0 || s.timeout <= 0 || s.maxBody <= 0 {
		return nil, fmt.Errorf("iq: NewHTTPSource: interval %s, timeout %s and max body %d must be positive", max(s.interval, 0), max(s.timeout, 0), s.maxBody)
	}
	s.poll = newPoller("metadata", s.refresh)
	s.poll.interval, s.poll.logger = s.interval, s.logger
	return s, nil
}

// Snapshot returns the last good metadata, or nil before the first
// successful poll.
func (s *HTTPSource) Snapshot() *Snapshot { return s.snap.Load() }

// LastPoll returns the time of the last successful poll (zero before the
// first) and the error of the last poll (nil if it succeeded).
func (s *HTTPSource) LastPoll() (lastOK time.Time, lastErr error) { return s.poll.last() }

// Start polls once right away and then every interval in a goroutine until
// Close. Calling it more than once has no effect.
func (s *HTTPSource) Start() { s.poll.start() }

// Close stops polling and waits for the poller to exit. It is safe to call
// more than once, and without Start.
func (s *HTTPSource) Close() error {
	s.poll.close()
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	return nil
}

type fetched struct {
	u   *url.URL
	doc *Document
	err error
}

// Refresh polls once, synchronously, and installs the merged metadata if at
// least one seed or instance answered with a valid document. Concurrent
// calls share one poll.
func (s *HTTPSource) Refresh(ctx context.Context) error { return s.poll.refresh(ctx) }

func (s *HTTPSource) refresh(ctx context.Context) error {
	targets := s.targets()
	results := make([]fetched, len(targets))
	var wg sync.WaitGroup
	for i, u := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := s.fetch(ctx, u)
			results[i] = fetched{u, d, err}
		}()
	}
	wg.Wait()

	var docs []*Document
	var primary *Document
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		docs = append(docs, r.doc)
		if primary == nil || (primary.State != "RUNNING" && r.doc.State == "RUNNING") {
			primary = r.doc
		}
	}
	var err error
	if primary == nil {
		err = fmt.Errorf("iq: metadata poll: no instance answered: %w", errors.Join(errs...))
	} else {
		snap, serr := NewSnapshot(mergeDocuments(primary, docs))
		if serr != nil {
			err = fmt.Errorf("iq: metadata from %s:%d: %w", primary.Self.Host, primary.Self.Port, serr)
		} else {
			s.snap.Store(snap)
			if len(errs) > 0 {
				s.logger.Debug("iq: some instances did not answer the metadata poll", "error", errors.Join(errs...))
			}
		}
	}
	return err
}

// targets returns the seeds and, with discovery, the URL of every instance
// of the last good metadata, without duplicates. The first len(seeds) are
// the seeds, so the primary prefers them.
func (s *HTTPSource) targets() []*url.URL {
	out := append([]*url.URL(nil), s.seeds...)
	snap := s.snap.Load()
	if !s.discover || snap == nil {
		return out
	}
	seen := make(map[string]bool, len(out))
	for _, u := range out {
		seen[u.Host] = true
	}
	for _, in := range snap.md.Instances {
		hp := in.HostInfo.String()
		if seen[hp] {
			continue
		}
		seen[hp] = true
		u := *s.seeds[0]
		u.Host = hp
		out = append(out, &u)
	}
	return out
}

func (s *HTTPSource) fetch(ctx context.Context, u *url.URL) (*Document, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	src := u.String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, fmt.Errorf("iq: %s: %w", src, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("iq: %s: %w", src, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("iq: %s: reading body: %w", src, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("iq: %s: %w", src, &StatusError{Code: resp.StatusCode, Body: truncate(string(body), 200)})
	}
	if int64(len(body)) > s.maxBody {
		return nil, fmt.Errorf("iq: %s: metadata document larger than %d bytes (WithMaxBodyBytes)", src, s.maxBody)
	}
	return ParseDocument(src, body)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..." + strconv.Itoa(len(s)-n) + " more bytes"
}

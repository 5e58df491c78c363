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

// Defaults of the sources.
const (
	defaultPollInterval = 5 * time.Second
	// defaultPollTimeout bounds one poll of one instance.
	defaultPollTimeout  = 2 * time.Second
	defaultMaxBodyBytes = 4 << 20
)

// WithMaxBodyBytes caps the size of a metadata document; a larger one
// fails that instance's poll. It must be positive. Default: 4 MiB. Taken
// by NewHTTPSource.
func WithMaxBodyBytes(n int64) Option {
	return option{"WithMaxBodyBytes", forHTTP, func(c *config) { c.maxBody = n }}
}

// WithHTTPClient sets the HTTP client; it must not be nil. Default: a
// client with no timeout of its own (WithPollTimeout bounds each request),
// whose idle connections Close closes. Taken by NewHTTPSource.
func WithHTTPClient(hc *http.Client) Option {
	return option{"WithHTTPClient", forHTTP, func(c *config) { c.httpClient = hc }}
}

// withPeerDiscovery turns polling of the other instances on or off (on by
// default); tests turn it off to count the seed's polls.
func withPeerDiscovery(on bool) Option {
	return option{"withPeerDiscovery", forHTTP, func(c *config) { c.discover = on }}
}

// httpSource polls the metadata endpoint of a Kafka Streams application
// (see NewHTTPSource).
type httpSource struct {
	seeds     []*url.URL
	timeout   time.Duration
	maxBody   int64
	client    *http.Client
	ownClient bool
	discover  bool
	logger    *slog.Logger

	snap atomic.Pointer[snapshot]
	poll *poller
}

// NewHTTPSource returns a Source that polls the metadata endpoint of a
// Kafka Streams application at urls (at least one, http or https; see
// "The metadata endpoint" in the package doc). Each poll fetches the seed
// URLs and every instance the last good metadata lists (at the seed URL's
// scheme and path, with the instance's application.server as host:port:
// each instance knows only its own lags and zone) concurrently, validates
// each document and merges them: the instance list comes from the first
// document in state RUNNING, seeds before discovered instances (else from
// the first document received), each instance's zone and lags from its
// own document. A poll fails only when no instance answered with a valid
// document. It does not poll until Start or Refresh.
func NewHTTPSource(urls []string, opts ...Option) (*Source, error) {
	if len(urls) == 0 {
		return nil, errors.New("iq: NewHTTPSource: no metadata URL")
	}
	defaultClient := &http.Client{}
	cfg := newConfig()
	cfg.interval, cfg.timeout = defaultPollInterval, defaultPollTimeout
	cfg.maxBody, cfg.httpClient, cfg.discover = defaultMaxBodyBytes, defaultClient, true
	s := &httpSource{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("iq: metadata URL %s: want http://host:port/path", quote(raw))
		}
		s.seeds = append(s.seeds, u)
	}
	if err := cfg.load(forHTTP, nil, opts); err != nil {
		return nil, err
	}
	s.timeout, s.maxBody = cfg.timeout, cfg.maxBody
	s.client, s.discover, s.logger = cfg.httpClient, cfg.discover, cfg.logger
	s.ownClient = s.client == defaultClient
	if s.client == nil {
		return nil, errors.New("iq: NewHTTPSource: nil HTTP client")
	}
	if cfg.interval <= 0 || s.timeout <= 0 || s.maxBody <= 0 {
		return nil, fmt.Errorf("iq: NewHTTPSource: interval %s, timeout %s and max body %d must be positive", max(cfg.interval, 0), max(s.timeout, 0), s.maxBody)
	}
	s.poll = newPoller("metadata", cfg.interval, s.logger, s.pollOnce)
	return &Source{impl: s}, nil
}

func (s *httpSource) snapshot() *snapshot                     { return s.snap.Load() }
func (s *httpSource) start()                                  { s.poll.start() }
func (s *httpSource) refresh(ctx context.Context) error       { return s.poll.refresh(ctx) }
func (s *httpSource) last() (lastOK time.Time, lastErr error) { return s.poll.last() }

func (s *httpSource) close() {
	s.poll.close()
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
}

type fetched struct {
	u   *url.URL
	doc *document
	err error
}

// pollOnce is one poll: it installs the merged metadata if at least one
// seed or instance answered with a valid document.
func (s *httpSource) pollOnce(ctx context.Context) error {
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

	var docs []*document
	var primary *document
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
		snap, serr := newSnapshot(mergeDocuments(primary, docs))
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
func (s *httpSource) targets() []*url.URL {
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

func (s *httpSource) fetch(ctx context.Context, u *url.URL) (*document, error) {
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
		return nil, fmt.Errorf("iq: %s: metadata document larger than %d bytes (iq.WithMaxBodyBytes)", src, s.maxBody)
	}
	return parseDocument(src, body)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..." + strconv.Itoa(len(s)-n) + " more bytes"
}

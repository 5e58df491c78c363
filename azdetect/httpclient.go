package azdetect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Body caps, in bytes. Metadata text answers are a few dozen bytes; an ECS
// task document grows with its containers; a Kubernetes node's metadata
// carries labels, annotations and managed fields.
const (
	maxTextBody = 4 << 10
	maxJSONBody = 64 << 10
	maxNodeBody = 256 << 10
)

// errBodyTooLarge reports a response body over its cap.
var errBodyTooLarge = errors.New("response body over its size cap")

// newMetadataClient returns the client for ECS, EC2, GCP and Azure: no
// proxy (metadata services are link-local and must never be proxied), no
// redirects, no keep-alive (detection runs once, and idle connections
// would outlive Detect), and every body capped at maxJSONBody.
func (d *Detector) newMetadataClient() *http.Client {
	var base http.RoundTripper
	var jar http.CookieJar
	if hc := d.cfg.HTTPClient; hc != nil {
		base, jar = hc.Transport, hc.Jar
		if base == nil {
			base = http.DefaultTransport
		}
	} else {
		base = d.newTransport(nil)
	}
	return &http.Client{
		Transport:     cappedTransport{base: base, max: maxJSONBody},
		CheckRedirect: noRedirect,
		Jar:           jar,
	}
}

// newTransport returns a transport for metadata requests.
func (d *Detector) newTransport(tlsConfig *tls.Config) *http.Transport {
	dial := d.cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return &http.Transport{
		Proxy:             nil,
		DialContext:       dial,
		TLSClientConfig:   tlsConfig,
		DisableKeepAlives: true,
		// The budget bounds every request through its context; this only
		// keeps a trickling server from holding headers beyond it.
		ResponseHeaderTimeout: d.cfg.Timeout,
		TLSHandshakeTimeout:   d.cfg.Timeout,
	}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// cappedTransport fails the read of any body longer than max bytes.
type cappedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

// cappedBody reads at most left bytes and then fails with errBodyTooLarge
// if the body goes on.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// readCapped reads r up to max bytes; a longer body is errBodyTooLarge.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("%w (%d bytes)", errBodyTooLarge, max)
	}
	return body, nil
}

// getBody sends req and returns the body of a 200 response. Other statuses
// are errors: 4xx wraps ErrNotThisCloud, redirects are not followed.
func getBody(hc *http.Client, req *http.Request, max int64) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, classifyNetErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drain a little so the reason can be quoted, never the whole body.
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, statusError(resp.StatusCode, head)
	}
	body, err := readCapped(resp.Body, max)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", req.URL.Path, classifyNetErr(err))
	}
	return body, nil
}

// statusError describes a non-200 answer; 4xx means "not this cloud".
func statusError(code int, head []byte) error {
	msg := fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	if len(head) > 0 {
		msg += ": " + quote(string(head))
	}
	if code >= 400 && code < 500 {
		return fmt.Errorf("%w: %s", ErrNotThisCloud, msg)
	}
	return errors.New(msg)
}

// classifyNetErr marks the errors that mean "no such service here" —
// connection refused, host or network unreachable — with ErrNotThisCloud.
func classifyNetErr(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return fmt.Errorf("%w: %w", ErrNotThisCloud, err)
	}
	return err
}

// parseText checks a plain-text metadata answer: one short line of
// printable UTF-8, not an HTML page. The zone itself is checked by
// validateAZ afterwards.
func parseText(body []byte) (string, error) {
	s := strings.TrimSpace(string(body))
	switch {
	case s == "":
		return "", errors.New("empty body")
	case !utf8.ValidString(s):
		return "", fmt.Errorf("body %s is not UTF-8 text", quote(s))
	case strings.HasPrefix(s, "<"):
		return "", fmt.Errorf("body %s looks like HTML, not a metadata value", quote(s))
	case strings.ContainsAny(s, "\r\n"):
		return "", fmt.Errorf("body %s has more than one line", quote(s))
	}
	return s, nil
}

// newRequest builds a GET with ctx.
func newRequest(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

package azdetect

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"cloud.google.com/go/compute/metadata"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// ---- AWS ECS: task metadata v4 ----

func (d *Detector) ecsReady() error {
	if d.cfg.ECSMetadataURI == "" {
		return fmt.Errorf("%w: %s unset", ErrNotConfigured, EnvECSMetadataURI)
	}
	return nil
}

func (d *Detector) ecsFetch(ctx context.Context) (string, string, error) {
	req, err := newRequest(ctx, strings.TrimRight(d.cfg.ECSMetadataURI, "/")+"/task")
	if err != nil {
		return "", "", fmt.Errorf("%s=%s: %w", EnvECSMetadataURI, quote(d.cfg.ECSMetadataURI), err)
	}
	body, err := getBody(d.env, req, maxJSONBody)
	if err != nil {
		return "", "", err
	}
	az, err := parseECSTask(body, d.cfg.Format)
	return az, "task AvailabilityZone", err
}

// parseECSTask returns the AvailabilityZone of an ECS task metadata v4
// document. Only Fargate (platform 1.4+) and recent EC2 agents set it; the
// document has no zone ID.
func parseECSTask(body []byte, format Format) (string, error) {
	var task struct {
		AvailabilityZone *string
	}
	if err := decodeJSONObject(body, &task); err != nil {
		return "", err
	}
	if task.AvailabilityZone == nil || *task.AvailabilityZone == "" {
		return "", fmt.Errorf("%w: task metadata has no AvailabilityZone", ErrNoZone)
	}
	if format == FormatID {
		return "", fmt.Errorf("%w: ECS task metadata has no zone ID, only the name %s", ErrNoZone, quote(*task.AvailabilityZone))
	}
	return *task.AvailabilityZone, nil
}

// decodeJSONObject decodes one JSON object and nothing after it.
func decodeJSONObject(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return errors.New("empty body")
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("body %s is not a JSON object", quote(string(trimmed)))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body %s: bad JSON: %w", quote(string(trimmed)), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("body %s: data after the JSON object", quote(string(trimmed)))
	}
	return nil
}

// ---- AWS EC2: IMDSv2 through the AWS SDK ----

func (d *Detector) ec2Ready() error {
	if d.cfg.EC2Disabled {
		return fmt.Errorf("%w: %s=true", ErrNotConfigured, EnvEC2Disabled)
	}
	return nil
}

// newIMDSClient returns an IMDS client that does exactly one attempt per
// request within the detection budget: no retries (a refused connection
// means "not EC2" at once), no IMDSv1 fallback, and the endpoint and
// enablement from Config rather than the SDK's own reading of the process
// environment. It is built per detection, so a detection is one full
// round: token PUT, then GET.
func (d *Detector) newIMDSClient(hc imds.HTTPClient) *imds.Client {
	return imds.New(imds.Options{
		Endpoint:                 d.cfg.EC2Endpoint,
		HTTPClient:               hc,
		ClientEnableState:        imds.ClientEnabled,
		Retryer:                  aws.NopRetryer{},
		DisableDefaultMaxBackoff: true,
		EnableFallback:           aws.FalseTernary,
	})
}

// failureRecorder remembers the first transport error or non-200 status
// seen, because the IMDS client's token errors do not unwrap to them.
type failureRecorder struct {
	hc     *http.Client
	mu     sync.Mutex
	err    error
	status int
	path   string
}

func (r *failureRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.hc.Do(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil && r.status == 0 {
		switch {
		case err != nil:
			r.err = err
		case resp.StatusCode != http.StatusOK:
			r.status, r.path = resp.StatusCode, req.URL.Path
		}
	}
	return resp, err
}

// classify turns the recorded failure into an error; sdkErr otherwise.
func (r *failureRecorder) classify(sdkErr error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.err != nil:
		return classifyNetErr(r.err)
	case r.status >= 300 && r.status < 400:
		return fmt.Errorf("%s: HTTP %d redirect, not followed", r.path, r.status)
	case r.status != 0:
		return fmt.Errorf("%s: %w", r.path, statusError(r.status, nil))
	}
	return sdkErr
}

func (d *Detector) ec2Fetch(ctx context.Context) (string, string, error) {
	path := "placement/availability-zone"
	if d.cfg.Format == FormatID {
		path = "placement/availability-zone-id"
	}
	rec := &failureRecorder{hc: d.env}
	out, err := d.newIMDSClient(rec).GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", "", rec.classify(err)
	}
	defer out.Content.Close()
	body, err := readCapped(out.Content, maxTextBody)
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", path, err)
	}
	s, err := parseText(body)
	return s, path, err
}

// ---- GCP: the compute metadata client ----

// gcpTransport sends every request of the metadata client to Config.GCPHost
// (whatever GCE_METADATA_HOST says in the process environment) and makes
// every failure final: the client's own retries (5 attempts with backoff,
// on refused connections too) would spend the budget on a machine that is
// not on GCP at all.
type gcpTransport struct {
	host string
	base http.RoundTripper
}

// gcpStop carries a failure past the metadata client's retry logic: it has
// neither Unwrap nor Temporary, so the client does not retry it.
type gcpStop struct{ err error }

func (e *gcpStop) Error() string { return e.err.Error() }

func (t gcpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Host, r.Host = t.host, ""
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, &gcpStop{classifyNetErr(err)}
	}
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		resp.Body.Close()
		return nil, &gcpStop{statusError(resp.StatusCode, head)}
	}
	// The real server sets this header; anything else answering on the
	// address is not the GCE metadata server.
	if resp.Header.Get("Metadata-Flavor") != "Google" {
		resp.Body.Close()
		return nil, &gcpStop{fmt.Errorf("%w: response lacks the Metadata-Flavor: Google header", ErrNotThisCloud)}
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxTextBody}
	return resp, nil
}

func (d *Detector) newGCPClient() *metadata.Client {
	return metadata.NewClient(&http.Client{
		Transport:     gcpTransport{host: d.cfg.GCPHost, base: d.env.Transport},
		CheckRedirect: noRedirect,
	})
}

func (d *Detector) gcpFetch(ctx context.Context) (string, string, error) {
	// Never metadata.OnGCE: it probes 169.254.169.254 and DNS on its own.
	v, err := d.gcp.GetWithContext(ctx, "instance/zone")
	if err != nil {
		var stop *gcpStop
		if errors.As(err, &stop) {
			err = stop.err
		}
		return "", "", err
	}
	zone, err := parseGCPZone(v)
	return zone, "instance/zone", err
}

// parseGCPZone returns the zone of "projects/<number>/zones/<zone>".
func parseGCPZone(v string) (string, error) {
	s, err := parseText([]byte(v))
	if err != nil {
		return "", err
	}
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != "zones" {
		return "", fmt.Errorf("instance/zone %s: want projects/<number>/zones/<zone>", quote(s))
	}
	return parts[3], nil
}

// ---- Azure: instance metadata service, standard library ----

// azureAPIVersion is an IMDS api-version every Azure region serves.
const azureAPIVersion = "2021-02-01"

func (d *Detector) azureGet(ctx context.Context, field string) (string, error) {
	u := strings.TrimRight(d.cfg.AzureEndpoint, "/") + "/metadata/instance/compute/" + field +
		"?api-version=" + azureAPIVersion + "&format=text"
	req, err := newRequest(ctx, u)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", EnvAzureEndpoint, quote(d.cfg.AzureEndpoint), err)
	}
	req.Header.Set("Metadata", "true")
	body, err := getBody(d.env, req, maxTextBody)
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	return parseText(body)
}

func (d *Detector) azureFetch(ctx context.Context) (string, string, error) {
	location, err := d.azureGet(ctx, "location")
	if err != nil {
		return "", "", err
	}
	if location == "" {
		return "", "", errors.New("compute/location: empty body")
	}
	zone, err := d.azureGet(ctx, "zone")
	if err != nil {
		return "", "", err
	}
	if zone == "" {
		return "", "", fmt.Errorf("%w: the VM in %s has no availability zone (regional deployment)", ErrNoZone, quote(location))
	}
	// Validate each part, so an error quotes the part that is wrong.
	for _, part := range [][2]string{{"compute/location", location}, {"compute/zone", zone}} {
		if _, err := validateAZ(part[1]); err != nil {
			return "", "", fmt.Errorf("%s=%s: %w", part[0], quote(part[1]), err)
		}
	}
	if d.cfg.Format == FormatID {
		// IMDS gives the subscription's logical zone only; the physical
		// zone behind "1" differs between subscriptions.
		return "", "", fmt.Errorf("%w: Azure IMDS has no zone ID, only the logical zone %s", ErrNoZone, quote(location+"-"+zone))
	}
	// The form AKS puts in topology.kubernetes.io/zone and WarpStream uses.
	return location + "-" + zone, "compute/location-zone", nil
}

// ---- Kubernetes: the node's topology label, standard library ----

const (
	labelZone   = "topology.kubernetes.io/zone"
	labelZoneID = "topology.k8s.aws/zone-id"
	maxFileSize = 1 << 20
)

func (d *Detector) k8sReady() error {
	var missing []string
	if d.cfg.KubernetesHost == "" {
		missing = append(missing, EnvKubernetesHost)
	}
	if d.cfg.NodeName == "" {
		missing = append(missing, EnvNodeName)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s unset", ErrNotConfigured, strings.Join(missing, " and "))
	}
	if _, err := os.Stat(d.cfg.KubernetesTokenFile); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no service-account token at %s", ErrNotConfigured, d.cfg.KubernetesTokenFile)
	}
	return nil
}

func readSmallFile(name string) ([]byte, error) {
	// A FIFO or a device would block the open or the read past the
	// detection's budget: only a regular file is read.
	if fi, err := os.Stat(name); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%v)", name, fi.Mode().Type())
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readCapped(f, maxFileSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

func (d *Detector) k8sClient() (*http.Client, error) {
	pem, err := readSmallFile(d.cfg.KubernetesCAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the API server CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", d.cfg.KubernetesCAFile)
	}
	tr := d.newTransport(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	return &http.Client{Transport: cappedTransport{base: tr, max: maxNodeBody}, CheckRedirect: noRedirect}, nil
}

func (d *Detector) k8sFetch(ctx context.Context) (string, string, error) {
	tok, err := readSmallFile(d.cfg.KubernetesTokenFile)
	if err != nil {
		return "", "", fmt.Errorf("reading the service-account token: %w", err)
	}
	token := strings.TrimSpace(string(tok))
	if token == "" || strings.ContainsAny(token, " \r\n\t") {
		return "", "", fmt.Errorf("token file %s: not a bearer token", d.cfg.KubernetesTokenFile)
	}
	hc, err := d.k8sClient()
	if err != nil {
		return "", "", err
	}
	u := "https://" + net.JoinHostPort(d.cfg.KubernetesHost, d.cfg.KubernetesPort) +
		"/api/v1/nodes/" + url.PathEscape(d.cfg.NodeName)
	req, err := newRequest(ctx, u)
	if err != nil {
		return "", "", fmt.Errorf("API server URL %s: %w", quote(u), err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	// Ask for the node's metadata only: labels without the status (images,
	// conditions) that make a full Node object large.
	req.Header.Set("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
	body, err := getBody(hc, req, maxNodeBody)
	if err != nil {
		if errors.Is(err, ErrNotThisCloud) && strings.Contains(err.Error(), "HTTP 403") {
			err = fmt.Errorf("%w (the service account needs \"get\" on \"nodes\"; or pass the zone in %s)", err, EnvAZ)
		}
		return "", "", err
	}
	label := labelZone
	if d.cfg.Format == FormatID {
		label = labelZoneID
	}
	az, err := parseNode(body, d.cfg.NodeName, label)
	return az, "node label " + label, err
}

// parseNode returns the label of node name from a Node or
// PartialObjectMetadata JSON document.
func parseNode(body []byte, name, label string) (string, error) {
	var node struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := decodeJSONObject(body, &node); err != nil {
		return "", err
	}
	if node.Kind != "Node" && node.Kind != "PartialObjectMetadata" {
		return "", fmt.Errorf("answer of kind %s, want a Node", quote(node.Kind))
	}
	if node.Metadata.Name != name {
		return "", fmt.Errorf("answer names node %s, want %s", quote(node.Metadata.Name), quote(name))
	}
	v, ok := node.Metadata.Labels[label]
	if !ok || v == "" {
		return "", fmt.Errorf("%w: node %s has no %s label", ErrNoZone, quote(name), label)
	}
	return v, nil
}

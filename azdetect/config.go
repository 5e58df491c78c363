package azdetect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Format selects the form of the zone the cloud providers return.
type Format string

const (
	// FormatName asks for zone names such as "us-east-1a", the form
	// WarpStream agents use. It is the default.
	FormatName Format = "name"
	// FormatID asks for AWS zone IDs such as "use1-az1", which name the same
	// physical zone in every AWS account. ECS task metadata and Azure have
	// no zone ID (ErrNoZone); GCP zone names are already account-independent
	// and are returned as is.
	FormatID Format = "id"
)

// Defaults of the Config fields left zero.
const (
	DefaultTimeout             = time.Second
	DefaultEC2Endpoint         = "http://169.254.169.254"
	DefaultGCPHost             = "169.254.169.254"
	DefaultAzureEndpoint       = "http://169.254.169.254"
	DefaultKubernetesPort      = "443"
	DefaultKubernetesTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	DefaultKubernetesCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvAZ              = "AZKAFKA_AZ"
	EnvWarpStreamAZ    = "WARPSTREAM_AVAILABILITY_ZONE"
	EnvAZFormat        = "AZKAFKA_AZ_FORMAT"
	EnvDetectProviders = "AZKAFKA_DETECT_PROVIDERS"
	EnvDetectTimeout   = "AZKAFKA_DETECT_TIMEOUT"
	EnvECSMetadataURI  = "ECS_CONTAINER_METADATA_URI_V4"
	EnvEC2Endpoint     = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
	EnvEC2EndpointMode = "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"
	EnvEC2Disabled     = "AWS_EC2_METADATA_DISABLED"
	EnvGCEMetadataHost = "GCE_METADATA_HOST"
	EnvAzureEndpoint   = "AZKAFKA_AZURE_IMDS_ENDPOINT"
	EnvKubernetesHost  = "KUBERNETES_SERVICE_HOST"
	EnvKubernetesPort  = "KUBERNETES_SERVICE_PORT"
	EnvNodeName        = "NODE_NAME"
	EnvKubernetesToken = "AZKAFKA_K8S_TOKEN_FILE"
	EnvKubernetesCA    = "AZKAFKA_K8S_CA_FILE"
)

const (
	// maxDetectTimeout bounds the budget: detection delays start-up.
	maxDetectTimeout     = time.Minute
	ec2IPv6Endpoint      = "http://[fd00:ec2::254]"
	defaultEnvAZVariable = EnvAZ
)

// Config is the configuration of a Detector. The zero value detects with
// every provider, the default endpoints and a 1 s budget.
type Config struct {
	// AZ, when not empty, is the zone to use (source "option"): no provider
	// runs and nothing touches the network. An invalid AZ fails detection.
	AZ string

	// EnvAZ is the zone taken from the environment (source "env"), with the
	// same effect as AZ; EnvAZVariable names the variable it came from, for
	// error messages. Default EnvAZVariable: "AZKAFKA_AZ".
	EnvAZ         string
	EnvAZVariable string

	// Format selects zone names or zone IDs. Default: FormatName.
	Format Format

	// Providers limits detection to these sources ("env", "ecs", "ec2",
	// "gcp", "azure", "kubernetes"); their order does not matter, the
	// precedence is fixed. Default (nil): all of them.
	Providers []string

	// Timeout is the budget of the whole detection: every provider runs in
	// parallel within it. Default: 1 s.
	Timeout time.Duration

	// ECSMetadataURI is the ECS task metadata v4 base URL. Empty: the ECS
	// provider is not configured.
	ECSMetadataURI string

	// EC2Endpoint is the base URL of the EC2 instance metadata service.
	// Default: "http://169.254.169.254".
	EC2Endpoint string
	// EC2Disabled turns the EC2 provider off (AWS_EC2_METADATA_DISABLED=true).
	EC2Disabled bool

	// GCPHost is the GCE metadata server's host[:port].
	// Default: "169.254.169.254".
	GCPHost string

	// AzureEndpoint is the base URL of the Azure instance metadata service.
	// Default: "http://169.254.169.254".
	AzureEndpoint string

	// KubernetesHost and KubernetesPort locate the API server; NodeName is
	// the node to read labels from. With KubernetesHost or NodeName empty
	// the Kubernetes provider is not configured. Default KubernetesPort: 443.
	KubernetesHost string
	KubernetesPort string
	NodeName       string
	// KubernetesTokenFile and KubernetesCAFile are the service-account
	// bearer token and the API server's CA bundle, read at each detection.
	// Defaults: the files under /var/run/secrets/kubernetes.io/serviceaccount.
	KubernetesTokenFile string
	KubernetesCAFile    string

	// HTTPClient, when set, carries the ECS, EC2, GCP and Azure requests:
	// its Transport and Jar are used, its CheckRedirect and Timeout are not
	// (redirects are never followed, the budget bounds every request), and
	// bodies are still capped. Metadata requests must not be proxied: a
	// Transport of your own should have no Proxy. Default: a client without
	// proxy or keep-alive, dialing with DialContext.
	HTTPClient *http.Client

	// DialContext, when set, opens every connection of the default
	// clients, Kubernetes included. Default: a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

var allProviders = []string{SourceEnv, SourceECS, SourceEC2, SourceGCP, SourceAzure, SourceKubernetes}

// ConfigFromEnv builds a Config from the environment through getenv
// (os.Getenv in production). A malformed variable is an error that names it
// and quotes its value, e.g. AZKAFKA_DETECT_TIMEOUT="1x": not a Go duration.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	var errs []error
	bad := func(name, value, why string) {
		errs = append(errs, fmt.Errorf("azdetect: %s=%s: %s", name, quote(value), why))
	}

	for _, name := range []string{EnvAZ, EnvWarpStreamAZ} {
		if v := getenv(name); strings.TrimSpace(v) != "" {
			if _, err := validateAZ(v); err != nil {
				errs = append(errs, fmt.Errorf("azdetect: %s %s=%s: %w", SourceEnv, name, quote(v), err))
			}
			cfg.EnvAZ, cfg.EnvAZVariable = v, name
			break
		}
	}

	switch v := getenv(EnvAZFormat); strings.ToLower(strings.TrimSpace(v)) {
	case "":
	case string(FormatName), string(FormatID):
		cfg.Format = Format(strings.ToLower(strings.TrimSpace(v)))
	default:
		bad(EnvAZFormat, v, `want "name" or "id" (any case)`)
	}

	if v := getenv(EnvDetectProviders); strings.TrimSpace(v) != "" {
		names, err := parseProviders(v)
		if err != nil {
			bad(EnvDetectProviders, v, err.Error())
		}
		cfg.Providers = names
	}

	if v := getenv(EnvDetectTimeout); strings.TrimSpace(v) != "" {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		switch {
		case err != nil:
			bad(EnvDetectTimeout, v, `not a Go duration such as "1s" or "500ms"`)
		case d <= 0 || d > maxDetectTimeout:
			bad(EnvDetectTimeout, v, fmt.Sprintf("must be > 0 and <= %v", maxDetectTimeout))
		default:
			cfg.Timeout = d
		}
	}

	if v := getenv(EnvECSMetadataURI); v != "" {
		if err := checkBaseURL(v); err != nil {
			bad(EnvECSMetadataURI, v, err.Error())
		}
		cfg.ECSMetadataURI = v
	}
	if v := getenv(EnvEC2Endpoint); v != "" {
		if err := checkBaseURL(v); err != nil {
			bad(EnvEC2Endpoint, v, err.Error())
		}
		cfg.EC2Endpoint = v
	} else if v := getenv(EnvEC2EndpointMode); v != "" {
		switch strings.ToLower(v) {
		case "ipv4":
		case "ipv6":
			cfg.EC2Endpoint = ec2IPv6Endpoint
		default:
			bad(EnvEC2EndpointMode, v, `want "IPv4" or "IPv6"`)
		}
	}
	// The AWS SDK disables IMDS only for "true" (any case); so do we.
	cfg.EC2Disabled = strings.EqualFold(strings.TrimSpace(getenv(EnvEC2Disabled)), "true")

	if v := getenv(EnvGCEMetadataHost); v != "" {
		if err := checkHostPort(v); err != nil {
			bad(EnvGCEMetadataHost, v, err.Error())
		}
		cfg.GCPHost = v
	}
	if v := getenv(EnvAzureEndpoint); v != "" {
		if err := checkBaseURL(v); err != nil {
			bad(EnvAzureEndpoint, v, err.Error())
		}
		cfg.AzureEndpoint = v
	}

	cfg.KubernetesHost = getenv(EnvKubernetesHost)
	if v := getenv(EnvKubernetesPort); v != "" {
		if p, err := strconv.Atoi(v); err != nil || p < 1 || p > 65535 {
			bad(EnvKubernetesPort, v, "not a TCP port number")
		}
		cfg.KubernetesPort = v
	}
	cfg.NodeName = getenv(EnvNodeName)
	cfg.KubernetesTokenFile = getenv(EnvKubernetesToken)
	cfg.KubernetesCAFile = getenv(EnvKubernetesCA)

	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// parseProviders parses a comma-separated list of provider names.
func parseProviders(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !isProvider(n) {
			return nil, fmt.Errorf("unknown provider %s (known: %s)", quote(n), strings.Join(allProviders, ", "))
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, errors.New("names no provider")
	}
	return names, nil
}

func isProvider(name string) bool {
	for _, p := range allProviders {
		if p == name {
			return true
		}
	}
	return false
}

func checkBaseURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an http:// or https:// URL")
	}
	return nil
}

func checkHostPort(v string) error {
	if strings.ContainsAny(v, "/?#@ ") {
		return errors.New("want host or host:port, without scheme or path")
	}
	if _, _, err := net.SplitHostPort(v); err != nil && strings.Contains(v, ":") && !strings.HasPrefix(v, "[") {
		return errors.New("want host or host:port")
	}
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.EnvAZVariable == "" {
		c.EnvAZVariable = defaultEnvAZVariable
	}
	if c.Format == "" {
		c.Format = FormatName
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.EC2Endpoint == "" {
		c.EC2Endpoint = DefaultEC2Endpoint
	}
	if c.GCPHost == "" {
		c.GCPHost = DefaultGCPHost
	}
	if c.AzureEndpoint == "" {
		c.AzureEndpoint = DefaultAzureEndpoint
	}
	if c.KubernetesPort == "" {
		c.KubernetesPort = DefaultKubernetesPort
	}
	if c.KubernetesTokenFile == "" {
		c.KubernetesTokenFile = DefaultKubernetesTokenFile
	}
	if c.KubernetesCAFile == "" {
		c.KubernetesCAFile = DefaultKubernetesCAFile
	}
	c.Providers = append([]string(nil), c.Providers...)
	return c
}

// enabled reports whether provider name takes part.
func (c *Config) enabled(name string) bool {
	if len(c.Providers) == 0 {
		return true
	}
	for _, p := range c.Providers {
		if p == name {
			return true
		}
	}
	return false
}

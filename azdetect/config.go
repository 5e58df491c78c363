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

	"github.com/azkafka/azkafka/internal/settings"
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
// every provider, the default endpoints and a 1 s budget. ConfigFromEnv
// fills it from the environment: each field's doc names its variable.
type Config struct {
	// AZ, when not empty, is the zone to use (source "option"): no provider
	// runs and nothing touches the network. An invalid AZ fails detection.
	AZ string

	// EnvAZ is the zone taken from the environment (source "env"), with the
	// same effect as AZ: AZKAFKA_AZ, else WARPSTREAM_AVAILABILITY_ZONE.
	// EnvAZVariable names the variable it came from, for error messages.
	// Default EnvAZVariable: "AZKAFKA_AZ".
	EnvAZ         string
	EnvAZVariable string

	// Format selects zone names or zone IDs (AZKAFKA_AZ_FORMAT). Default:
	// FormatName.
	Format Format

	// Providers limits detection to these sources ("env", "ecs", "ec2",
	// "gcp", "azure", "kubernetes"); their order does not matter, the
	// precedence is fixed. AZKAFKA_DETECT_PROVIDERS, comma-separated.
	// Default (nil): all of them.
	Providers []string

	// Timeout is the budget of the whole detection: every provider runs in
	// parallel within it (AZKAFKA_DETECT_TIMEOUT). Default: DefaultTimeout
	// (1 s).
	Timeout time.Duration

	// ECSMetadataURI is the ECS task metadata v4 base URL
	// (ECS_CONTAINER_METADATA_URI_V4, which ECS sets). Empty: the ECS
	// provider is not configured.
	ECSMetadataURI string

	// EC2Endpoint is the base URL of the EC2 instance metadata service
	// (AWS_EC2_METADATA_SERVICE_ENDPOINT, else
	// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 for
	// http://[fd00:ec2::254], as the AWS SDK reads them). Default:
	// DefaultEC2Endpoint.
	EC2Endpoint string
	// EC2Disabled turns the EC2 provider off (AWS_EC2_METADATA_DISABLED=true).
	EC2Disabled bool

	// GCPHost is the GCE metadata server's host[:port]
	// (GCE_METADATA_HOST). Default: DefaultGCPHost.
	GCPHost string

	// AzureEndpoint is the base URL of the Azure instance metadata service
	// (AZKAFKA_AZURE_IMDS_ENDPOINT). Default: DefaultAzureEndpoint.
	AzureEndpoint string

	// KubernetesHost locates the API server (KUBERNETES_SERVICE_HOST,
	// which Kubernetes sets in every pod). Empty: the Kubernetes provider
	// is not configured.
	KubernetesHost string
	// KubernetesPort is the API server's port (KUBERNETES_SERVICE_PORT).
	// Default: DefaultKubernetesPort.
	KubernetesPort string
	// NodeName is the node whose labels give the zone (NODE_NAME, set from
	// the pod's spec.nodeName by the downward API). Empty: the Kubernetes
	// provider is not configured.
	NodeName string
	// KubernetesTokenFile is the service-account bearer token, read at
	// each detection (AZKAFKA_K8S_TOKEN_FILE). Default:
	// DefaultKubernetesTokenFile.
	KubernetesTokenFile string
	// KubernetesCAFile is the API server's CA bundle, read at each
	// detection (AZKAFKA_K8S_CA_FILE). Default: DefaultKubernetesCAFile.
	KubernetesCAFile string

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
// (os.Getenv in production; "" is unset). A malformed variable, or one of
// the package's own set to blanks, is an error that names it and quotes
// its value, e.g. azdetect: AZKAFKA_DETECT_TIMEOUT="1x": not a Go
// duration; the error lists every bad variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	return ConfigFromLookup(settings.LookupFromGetenv(getenv))
}

// ConfigFromLookup is ConfigFromEnv through lookup, which, as
// os.LookupEnv, tells a variable set to "" from an unset one: a variable
// of the package's own set to blanks, even "", is an error.
func ConfigFromLookup(lookup func(string) (string, bool)) (Config, error) {
	var cfg Config
	if err := settings.Apply("azdetect", envVars, &cfg, lookup); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func init() { settings.Register("azdetect", envVars, func() Config { return Config{} }) }

// envVars is the table of the package's settings: every variable
// ConfigFromEnv reads, in the README's order (see package
// internal/settings: the README's rows are generated from it by
// TestREADMEConfigTable, and each Config field's doc names its variable).
// The platforms' own variables have no README row: the README and the
// package doc name them with their provider.
var envVars = []settings.Var[Config]{
	{Name: EnvAZ, Default: "detected", Option: "Config.EnvAZ",
		Doc: "Availability zone; `^[a-z0-9-]{1,128}$`. Without it (or `WARPSTREAM_AVAILABILITY_ZONE`), the zone is detected: the rows below.",
		Set: setEnvAZ(EnvAZ)},
	{Name: EnvWarpStreamAZ, Default: "unset", Option: "Config.EnvAZ", Foreign: true,
		Doc: "The WarpStream agents' own variable, read when `AZKAFKA_AZ` is unset.",
		Set: setEnvAZ(EnvWarpStreamAZ)},
	{Name: EnvAZFormat, Default: settings.Code(FormatName), Option: "Config.Format",
		Doc: "`name` (`us-east-1a`, what WarpStream uses) or `id` (the AWS zone ID, `use1-az1`, what MSK puts in `broker.rack`).",
		Set: func(c *Config, v string) error {
			switch f := Format(strings.ToLower(v)); f {
			case FormatName, FormatID:
				c.Format = f
				return nil
			}
			return errors.New(`want "name" or "id" (any case)`)
		}},
	{Name: EnvDetectProviders, Default: "all", Option: "Config.Providers",
		Doc: "Comma-separated subset of `env,ecs,ec2,gcp,azure,kubernetes`, in any case; an unknown name is an error.",
		Set: func(c *Config, v string) (err error) {
			c.Providers, err = parseProviders(v)
			return err
		}},
	{Name: EnvDetectTimeout, Default: settings.Code(DefaultTimeout), Option: "Config.Timeout",
		Doc: "Budget of the whole detection, a Go duration, > 0 and ≤ 1m; off-cloud, start-up pays it once per process.",
		Set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				return errors.New(`not a Go duration such as "1s" or "500ms"`)
			case d <= 0 || d > maxDetectTimeout:
				return fmt.Errorf("must be > 0 and <= %v", maxDetectTimeout)
			}
			c.Timeout = d
			return nil
		}},
	{Name: EnvAzureEndpoint, Default: settings.Code(DefaultAzureEndpoint), Option: "Config.AzureEndpoint",
		Doc: "Azure instance metadata service.",
		Set: func(c *Config, v string) error { return setURL(&c.AzureEndpoint, v) }},
	{Name: EnvKubernetesToken, Default: settings.Code(DefaultKubernetesTokenFile), Option: "Config.KubernetesTokenFile",
		Doc: "Service-account token of the `kubernetes` provider (it needs `get` on `nodes` and `NODE_NAME`: see [`azdetect`](https://pkg.go.dev/github.com/azkafka/azkafka/azdetect#hdr-Kubernetes)).",
		Set: func(c *Config, v string) error { c.KubernetesTokenFile = v; return nil }},
	{Name: EnvKubernetesCA, Default: settings.Code(DefaultKubernetesCAFile), Option: "Config.KubernetesCAFile",
		Doc: "The API server's CA bundle.",
		Set: func(c *Config, v string) error { c.KubernetesCAFile = v; return nil }},

	{Name: EnvECSMetadataURI, Option: "Config.ECSMetadataURI", Foreign: true,
		Set: func(c *Config, v string) error { return setURL(&c.ECSMetadataURI, v) }},
	// The mode before the endpoint, which wins over it.
	{Name: EnvEC2EndpointMode, Option: "Config.EC2Endpoint", Foreign: true,
		Set: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "ipv4":
			case "ipv6":
				c.EC2Endpoint = ec2IPv6Endpoint
			default:
				return errors.New(`want "IPv4" or "IPv6"`)
			}
			return nil
		}},
	{Name: EnvEC2Endpoint, Option: "Config.EC2Endpoint", Foreign: true,
		Set: func(c *Config, v string) error { return setURL(&c.EC2Endpoint, v) }},
	// The AWS SDK disables IMDS only for "true" (any case); so does this.
	{Name: EnvEC2Disabled, Option: "Config.EC2Disabled", Foreign: true,
		Set: func(c *Config, v string) error { c.EC2Disabled = strings.EqualFold(v, "true"); return nil }},
	{Name: EnvGCEMetadataHost, Option: "Config.GCPHost", Foreign: true,
		Set: func(c *Config, v string) error {
			if err := checkHostPort(v); err != nil {
				return err
			}
			c.GCPHost = v
			return nil
		}},
	{Name: EnvKubernetesHost, Option: "Config.KubernetesHost", Foreign: true,
		Set: func(c *Config, v string) error { c.KubernetesHost = v; return nil }},
	{Name: EnvKubernetesPort, Option: "Config.KubernetesPort", Foreign: true,
		Set: func(c *Config, v string) error {
			if p, err := strconv.Atoi(v); err != nil || p < 1 || p > 65535 {
				return errors.New("not a TCP port number")
			}
			c.KubernetesPort = v
			return nil
		}},
	{Name: EnvNodeName, Option: "Config.NodeName", Foreign: true,
		Set: func(c *Config, v string) error { c.NodeName = v; return nil }},
}

// setEnvAZ returns the Set of a variable naming the zone: the first one
// set, in the table's order, gives Config.EnvAZ.
func setEnvAZ(name string) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		if c.EnvAZ != "" {
			return nil
		}
		if _, err := validateAZ(v); err != nil {
			return err
		}
		c.EnvAZ, c.EnvAZVariable = v, name
		return nil
	}
}

func setURL(field *string, v string) error {
	if err := checkBaseURL(v); err != nil {
		return err
	}
	*field = v
	return nil
}

// parseProviders parses a comma-separated list of provider names.
func parseProviders(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
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

package azdetect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/compute/metadata"
)

// Source names: the value of Result.Source and ProviderResult.Name, listed
// in precedence order (an earlier source wins over a later one).
const (
	SourceOption     = "option"     // Config.AZ
	SourceEnv        = "env"        // AZKAFKA_AZ or WARPSTREAM_AVAILABILITY_ZONE
	SourceECS        = "ecs"        // AWS ECS task metadata v4
	SourceEC2        = "ec2"        // AWS EC2 instance metadata (IMDSv2)
	SourceGCP        = "gcp"        // Google Compute Engine metadata server
	SourceAzure      = "azure"      // Azure instance metadata service
	SourceKubernetes = "kubernetes" // the node's topology labels, from the API server
)

// Result is the outcome of a detection.
type Result struct {
	// AZ is the validated availability zone, e.g. "us-east-1a".
	AZ string
	// Source names the provider that supplied AZ: "option", "env", "ecs",
	// "ec2", "gcp", "azure" or "kubernetes".
	Source string
	// Elapsed is the time the detection took.
	Elapsed time.Duration
	// Providers holds each enabled provider's own outcome, in precedence
	// order. A cached Result is shared by every caller: do not modify it.
	Providers []ProviderResult
}

// ProviderResult is one provider's outcome.
type ProviderResult struct {
	// Name is the provider's source name, e.g. "ec2".
	Name string
	// AZ is the validated zone the provider found; empty when Err is set.
	AZ string
	// Err says why the provider found no zone. It matches ErrNotConfigured,
	// ErrNotThisCloud, ErrNoZone, ErrInvalidAZ, ErrSuperseded or
	// context.DeadlineExceeded (no answer within the budget) with
	// errors.Is, is the cause that ended the caller's ctx, or is another
	// failure (bad body, 5xx, ...).
	Err error
	// Elapsed is the time the provider ran; zero for a provider that was
	// not configured.
	Elapsed time.Duration
}

var (
	// ErrNoAZ is matched (errors.Is) by every error Detect returns: no
	// provider found an availability zone, or the configuration was invalid.
	ErrNoAZ = errors.New("azdetect: no availability zone found")

	// ErrInvalidAZ is matched by errors about a zone that fails Validate.
	ErrInvalidAZ = errors.New("invalid AZ")

	// ErrNotConfigured means a provider's prerequisites are absent (e.g.
	// ECS_CONTAINER_METADATA_URI_V4 unset): it answered without any network call.
	ErrNotConfigured = errors.New("not configured")

	// ErrNotThisCloud means the metadata service refused the connection,
	// is unreachable, or answered with a 4xx status.
	ErrNotThisCloud = errors.New("not this cloud")

	// ErrNoZone means the service answered but has no zone to give: an Azure
	// VM deployed without a zone, a Kubernetes node without the label, ECS
	// task metadata without AvailabilityZone, or a zone ID asked of a
	// source that has none.
	ErrNoZone = errors.New("no zone here")

	// ErrSuperseded marks providers that were stopped because a
	// higher-ranked provider had already answered.
	ErrSuperseded = errors.New("not needed: a higher-ranked provider answered")
)

// DetectError is the error of a failed detection; it lists every provider's
// reason. errors.Is(err, ErrNoAZ) is true for every DetectError, and
// errors.Is/As also see the underlying Config error and provider errors.
type DetectError struct {
	// Config is the configuration error that stopped detection before any
	// provider ran, or nil.
	Config error
	// Providers holds every enabled provider's outcome, in precedence order.
	Providers []ProviderResult
	// Elapsed is the time the detection took.
	Elapsed time.Duration
}

// Error says that no zone was found and why: the configuration error, or
// each provider's outcome.
func (e *DetectError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNoAZ.Error())
	if e.Config != nil {
		b.WriteString(": ")
		b.WriteString(e.Config.Error())
		return b.String()
	}
	if len(e.Providers) == 0 {
		b.WriteString(": no provider enabled")
		return b.String()
	}
	fmt.Fprintf(&b, " in %v:", e.Elapsed.Round(time.Millisecond))
	for i, p := range e.Providers {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s: %v", p.Name, p.Err)
	}
	return b.String()
}

// Unwrap returns ErrNoAZ, the Config error if any, and each provider's error.
func (e *DetectError) Unwrap() []error {
	errs := []error{ErrNoAZ}
	if e.Config != nil {
		errs = append(errs, e.Config)
	}
	for _, p := range e.Providers {
		if p.Err != nil {
			errs = append(errs, p.Err)
		}
	}
	return errs
}

// Detector detects the availability zone with a fixed Config. It runs the
// detection once and caches the outcome, a failure included; Redetect runs
// it again. A Detector is safe for concurrent use.
type Detector struct {
	cfg   Config
	cache cache

	clients sync.Once    // builds the clients below at the first network detection
	env     *http.Client // ECS, EC2 and Azure; the base of GCP's
	gcp     *metadata.Client
}

// New returns a Detector for cfg. Zero fields of cfg take the defaults
// documented on Config. New does no I/O; a Config from ConfigFromEnv is
// already validated, other fields are checked by Detect.
func New(cfg Config) *Detector {
	return &Detector{cfg: cfg.withDefaults()}
}

// Detect returns the availability zone, running the detection on the first
// call and returning the cached outcome afterwards. Concurrent first callers
// share one detection. When ctx ends before the detection does, it acts as
// the end of the budget: the highest-ranked valid answer already in is
// returned (and cached); with none, Detect returns ctx's error and nothing
// is cached. A caller that joined a detection in flight and whose ctx ends
// first stops waiting with ctx's error.
func (d *Detector) Detect(ctx context.Context) (Result, error) {
	return d.cache.get(ctx, false, d.detect)
}

// Redetect runs a new detection, replaces the cached outcome with it when it
// completes, and returns it. Use it in long-lived processes, e.g. after a
// failure at start-up.
func (d *Detector) Redetect(ctx context.Context) (Result, error) {
	return d.cache.get(ctx, true, d.detect)
}

// process is the process-wide cache behind the package-level Detect.
var process cache

// Detect returns the process's availability zone. The first call reads the
// configuration from the environment (ConfigFromEnv(os.Getenv)) and runs the
// detection; later calls return the cached outcome — a failure is cached
// too, so that a process off-cloud pays the budget once. Concurrent first
// callers share one detection. Call Redetect to detect again.
//
// Every error matches ErrNoAZ with errors.Is. It is a *DetectError listing
// each provider's reason (matching ctx's error too when ctx ended before any
// provider answered; such a failure is not cached), or, for a caller that
// stopped waiting on a detection another caller started, ctx's error. When
// ctx or the budget ends first, the highest-ranked valid answer already in
// is the result.
// Detect is safe for concurrent use and leaves no goroutine behind.
func Detect(ctx context.Context) (Result, error) {
	return process.get(ctx, false, detectFromEnv)
}

// Redetect re-reads the environment, runs a new detection and makes its
// outcome the one Detect returns from then on.
func Redetect(ctx context.Context) (Result, error) {
	return process.get(ctx, true, detectFromEnv)
}

func detectFromEnv(ctx context.Context) (Result, error) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return Result{}, &DetectError{Config: err}
	}
	return New(cfg).detect(ctx)
}

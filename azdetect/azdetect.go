package azdetect

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"
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
	// Providers holds each provider's own outcome, in precedence order.
	Providers []ProviderResult
}

// ProviderResult is one provider's outcome.
type ProviderResult struct {
	Name    string
	AZ      string
	Err     error
	Elapsed time.Duration
}

// ErrNoAZ is returned (wrapped) when no provider found an availability zone.
var ErrNoAZ = errors.New("azdetect: no availability zone found")

// Detect returns the process's availability zone, detecting it on the first
// call and caching the result for the life of the process.
//
// This placeholder reads only AZKAFKA_AZ; the full provider set replaces it.
func Detect(ctx context.Context) (Result, error) {
	if az := strings.TrimSpace(os.Getenv("AZKAFKA_AZ")); az != "" {
		return Result{AZ: az, Source: "env"}, nil
	}
	return Result{}, ErrNoAZ
}

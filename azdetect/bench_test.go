package azdetect

import (
	"context"
	"strings"
	"testing"
	"time"
)

// offCloud points every provider, ECS and Kubernetes included, at one
// loopback listener that accepts and never answers.
func offCloud(b *testing.B, budget time.Duration) Config {
	hole := newBlackHole(b)
	k8s := newFakeK8s(b, "n1", nil) // for its token and CA files
	cfg := baseConfig(b)
	cfg.Timeout = budget
	cfg.ECSMetadataURI = "http://" + hole.addr() + "/v4/x"
	cfg.EC2Endpoint = "http://" + hole.addr()
	cfg.GCPHost = hole.addr()
	cfg.AzureEndpoint = "http://" + hole.addr()
	k8s.configure(&cfg)
	host, port, _ := strings.Cut(hole.addr(), ":")
	cfg.KubernetesHost, cfg.KubernetesPort = host, port
	return cfg
}

// Off-cloud, every provider stuck: how far past the budget does Detect
// return? Reported as ms-over-budget (mean, per detection).
func BenchmarkDetectOffCloud(b *testing.B) {
	for _, budget := range []time.Duration{200 * time.Millisecond, time.Second} {
		b.Run("blackhole/budget="+budget.String(), func(b *testing.B) {
			cfg := offCloud(b, budget)
			var over, worst time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := New(cfg).Detect(context.Background()); err == nil {
					b.Fatal("found a zone in a black hole")
				}
				o := time.Since(start) - budget
				over += o
				worst = max(worst, o)
			}
			b.ReportMetric(float64(over.Microseconds())/1000/float64(b.N), "ms-over-budget")
			b.ReportMetric(float64(worst.Microseconds())/1000, "ms-over-budget-max")
		})
	}
	// The common laptop case: nothing listens on the metadata addresses.
	b.Run("refused", func(b *testing.B) {
		cfg := baseConfig(b, SourceEnv, SourceEC2, SourceGCP, SourceAzure)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := New(cfg).Detect(context.Background()); err == nil {
				b.Fatal("found a zone")
			}
		}
	})
}

// AZKAFKA_AZ set: no network at all.
func BenchmarkDetectEnv(b *testing.B) {
	cfg := Config{EnvAZ: "us-east-1a", DialContext: loopbackDial(b, nil)}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := New(cfg).Detect(context.Background()); err != nil || res.AZ != "us-east-1a" {
			b.Fatal(res, err)
		}
	}
}

// The cached answer, as every caller after the first sees it.
func BenchmarkDetectCached(b *testing.B) {
	d := New(Config{AZ: "us-east-1a"})
	if _, err := d.Detect(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Detect(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// A full IMDSv2 round (token PUT, GET) against a loopback fake.
func BenchmarkDetectFakeIMDS(b *testing.B) {
	f := newFakeIMDS(b, "us-east-1a", "use1-az6")
	cfg := baseConfig(b, SourceEC2)
	cfg.EC2Endpoint = f.URL
	b.ReportAllocs()
	for b.Loop() {
		if res, err := New(cfg).Detect(context.Background()); err != nil || res.AZ != "us-east-1a" {
			b.Fatal(res, err)
		}
	}
}

// ECS accepts and never answers, EC2 answers at once: the EC2 zone is the
// answer when the budget ends. How far past the budget does Detect return?
func BenchmarkDetectBudgetAnswer(b *testing.B) {
	const budget = 200 * time.Millisecond
	hole := newBlackHole(b)
	ec2 := newFakeIMDS(b, "us-east-1a", "use1-az6")
	cfg := baseConfig(b, SourceECS, SourceEC2)
	cfg.Timeout = budget
	cfg.ECSMetadataURI = "http://" + hole.addr() + "/v4/x"
	cfg.EC2Endpoint = ec2.URL
	var over, worst time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if res, err := New(cfg).Detect(context.Background()); err != nil || res.Source != SourceEC2 {
			b.Fatal(res, err)
		}
		o := time.Since(start) - budget
		over += o
		worst = max(worst, o)
	}
	b.ReportMetric(float64(over.Microseconds())/1000/float64(b.N), "ms-over-budget")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-over-budget-max")
}

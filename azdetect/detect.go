package azdetect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// provider is one network source of the zone.
type provider struct {
	name string
	// ready reports, without any I/O beyond the process's own files,
	// whether the provider can run; its error wraps ErrNotConfigured.
	ready func() error
	// fetch returns the raw zone and where in the answer it was found
	// (for error messages); the caller validates it.
	fetch func(ctx context.Context) (raw, where string, err error)
}

// providers returns the enabled network providers in precedence order.
func (d *Detector) providers() []provider {
	all := []provider{
		{SourceECS, d.ecsReady, d.ecsFetch},
		{SourceEC2, d.ec2Ready, d.ec2Fetch},
		{SourceGCP, nil, d.gcpFetch},
		{SourceAzure, nil, d.azureFetch},
		{SourceKubernetes, d.k8sReady, d.k8sFetch},
	}
	ps := all[:0]
	for _, p := range all {
		if d.cfg.enabled(p.name) {
			ps = append(ps, p)
		}
	}
	return ps
}

// check reports configuration errors that ConfigFromEnv would have caught.
func (c *Config) check() error {
	var errs []error
	if c.Format != FormatName && c.Format != FormatID {
		errs = append(errs, fmt.Errorf("azdetect: Config.Format %s: want %q or %q", quote(string(c.Format)), FormatName, FormatID))
	}
	for _, p := range c.Providers {
		if !isProvider(p) {
			errs = append(errs, fmt.Errorf("azdetect: Config.Providers: unknown provider %s", quote(p)))
		}
	}
	if c.Timeout > maxDetectTimeout {
		errs = append(errs, fmt.Errorf("azdetect: Config.Timeout %v: must be <= %v", c.Timeout, maxDetectTimeout))
	}
	return errors.Join(errs...)
}

// explicit returns the outcome of an explicit zone, or ok=false if none is set.
func (d *Detector) explicit() (pr ProviderResult, ok bool) {
	switch {
	case d.cfg.AZ != "":
		pr = ProviderResult{Name: SourceOption}
		pr.AZ, pr.Err = validateAZ(d.cfg.AZ)
		if pr.Err != nil {
			pr.Err = fmt.Errorf("Config.AZ=%s: %w", quote(d.cfg.AZ), pr.Err)
		}
		return pr, true
	case d.cfg.enabled(SourceEnv) && d.cfg.EnvAZ != "":
		pr = ProviderResult{Name: SourceEnv}
		pr.AZ, pr.Err = validateAZ(d.cfg.EnvAZ)
		if pr.Err != nil {
			pr.Err = fmt.Errorf("%s=%s: %w", d.cfg.EnvAZVariable, quote(d.cfg.EnvAZ), pr.Err)
		}
		return pr, true
	}
	return pr, false
}

// budgetError is the cause given to providers stopped by the budget.
type budgetError struct{ budget time.Duration }

func (e budgetError) Error() string {
	return fmt.Sprintf("no answer within the %v budget", e.budget)
}
func (e budgetError) Unwrap() error { return context.DeadlineExceeded }

// detect runs one detection, uncached.
func (d *Detector) detect(ctx context.Context) (Result, error) {
	start := time.Now()
	if err := d.cfg.check(); err != nil {
		return Result{}, &DetectError{Config: err}
	}
	// An explicit zone is authoritative: valid, it is the answer; invalid,
	// detection fails rather than silently picking another zone.
	if pr, ok := d.explicit(); ok {
		if pr.Err != nil {
			return Result{}, &DetectError{Providers: []ProviderResult{pr}, Elapsed: time.Since(start)}
		}
		return Result{AZ: pr.AZ, Source: pr.Name, Elapsed: time.Since(start), Providers: []ProviderResult{pr}}, nil
	}

	d.clients.Do(func() {
		d.env = d.newMetadataClient()
		d.gcp = d.newGCPClient()
	})

	var results []ProviderResult
	if d.cfg.enabled(SourceEnv) {
		results = append(results, ProviderResult{Name: SourceEnv,
			Err: fmt.Errorf("%w: %s and %s unset", ErrNotConfigured, EnvAZ, EnvWarpStreamAZ)})
	}
	ps := d.providers()
	base := len(results)
	results = append(results, make([]ProviderResult, len(ps))...)
	fetched := results[base:]

	budget, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout, budgetError{d.cfg.Timeout})
	defer cancel()
	stop, stopCause := context.WithCancelCause(budget)
	defer stopCause(nil)

	type answer struct {
		i  int
		pr ProviderResult
	}
	answers := make(chan answer, len(ps))
	finished := make([]bool, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		fetched[i].Name = p.name
		if p.ready != nil {
			if err := p.ready(); err != nil {
				fetched[i].Err = err
				finished[i] = true
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			pr := ProviderResult{Name: p.name}
			raw, where, err := p.fetch(stop)
			if err == nil {
				pr.AZ, err = validateAZ(raw)
				if err != nil {
					err = fmt.Errorf("%s=%s: %w", where, quote(raw), err)
				}
			}
			if err != nil && stop.Err() != nil {
				// Stopped by the budget, the caller, or a better answer:
				// say which, rather than how the request broke off.
				err = context.Cause(stop)
			}
			pr.Err = err
			pr.Elapsed = time.Since(t0)
			answers <- answer{i, pr}
		}()
	}

	// decided reports whether the best possible answer is known: the
	// highest-ranked provider still able to answer has answered.
	decided := func() (winner int, ok bool) {
		for i := range ps {
			if !finished[i] {
				return -1, false
			}
			if fetched[i].Err == nil {
				return i, true
			}
		}
		return -1, true
	}
	winner, ok := decided()
	for !ok {
		select {
		case a := <-answers:
			fetched[a.i], finished[a.i] = a.pr, true
			winner, ok = decided()
		case <-stop.Done():
			ok = true
		}
	}
	if winner >= 0 {
		stopCause(ErrSuperseded)
	} else {
		stopCause(nil)
	}
	wg.Wait()
	close(answers)
	for a := range answers { // answers that came in after the decision
		fetched[a.i] = a.pr
	}

	elapsed := time.Since(start)
	if winner < 0 {
		return Result{}, &DetectError{Providers: results, Elapsed: elapsed}
	}
	return Result{AZ: fetched[winner].AZ, Source: fetched[winner].Name, Elapsed: elapsed, Providers: results}, nil
}

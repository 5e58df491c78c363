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

// pastDeadline reports whether ctx's deadline has passed, even if its
// timer has not fired yet.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

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
	d.race(ctx, ps, fetched)

	// The highest-ranked valid answer wins, whenever it came in.
	elapsed := time.Since(start)
	for _, pr := range fetched {
		if pr.Err == nil {
			return Result{AZ: pr.AZ, Source: pr.Name, Elapsed: elapsed, Providers: results}, nil
		}
	}
	return Result{}, &DetectError{Providers: results, Elapsed: elapsed}
}

// answer is the outcome pr of the provider of index i.
type answer struct {
	i  int
	pr ProviderResult
}

// race runs the providers ps at once within the budget and ctx, and sets
// fetched[i] to the outcome of ps[i]. Once the best possible answer is
// known, the providers still running are stopped with ErrSuperseded; race
// returns when all of them have.
func (d *Detector) race(ctx context.Context, ps []provider, fetched []ProviderResult) {
	budget, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout, budgetError{d.cfg.Timeout})
	defer cancel()
	stop, stopCause := context.WithCancelCause(budget)
	defer stopCause(nil)

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
			answers <- answer{i, p.run(budget, stop)}
		}()
	}

	collect(stop, answers, fetched, finished)
	stopCause(ErrSuperseded) // no effect when stop has already ended
	wg.Wait()
	close(answers)
	for a := range answers { // answers that came in after the decision
		fetched[a.i] = a.pr
	}
}

// run fetches p's zone under stop, a child of the detection's budget, and
// judges it; the result's Elapsed is the time run took.
func (p provider) run(budget, stop context.Context) ProviderResult {
	t0 := time.Now()
	pr := ProviderResult{Name: p.name}
	raw, where, err := p.fetch(stop)
	if err != nil && pastDeadline(budget) {
		// A transport timeout of the same length as the budget
		// can fire a moment before the budget's own timer.
		<-stop.Done()
	}
	switch {
	case err != nil && stop.Err() != nil:
		// Stopped by the budget, the caller, or a better answer:
		// say which, rather than how the request broke off.
		err = context.Cause(stop)
	case err == nil:
		// An answer that came in is judged on its own, even when
		// it came in as the detection was stopping.
		pr.AZ, err = validateAZ(raw)
		if err != nil {
			err = fmt.Errorf("%s=%s: %w", where, quote(raw), err)
		}
	}
	pr.Err = err
	pr.Elapsed = time.Since(t0)
	return pr
}

// collect records answers in fetched and finished until the best possible
// answer is known or stop ends.
func collect(stop context.Context, answers <-chan answer, fetched []ProviderResult, finished []bool) {
	for !decided(fetched, finished) {
		select {
		case a := <-answers:
			fetched[a.i], finished[a.i] = a.pr, true
		case <-stop.Done():
			// The budget or the caller's ctx ended first: the providers
			// still running report that cause, the answers in stand.
			return
		}
	}
}

// decided reports whether the best possible answer is known: every
// provider ranked above the highest-ranked valid answer has failed.
func decided(fetched []ProviderResult, finished []bool) bool {
	for i := range finished {
		if !finished[i] {
			return false
		}
		if fetched[i].Err == nil {
			return true
		}
	}
	return true
}

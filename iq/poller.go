package iq

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// poller runs a source's poll function once right away and then every
// interval until closed, and lets callers force a poll. Concurrent forced
// polls share one run, so a burst of failing queries costs one poll.
type poller struct {
	interval time.Duration
	logger   *slog.Logger
	what     string // for the log line: "metadata", "group"
	poll     func(ctx context.Context) error

	mu       sync.Mutex
	lastErr  error
	lastOK   time.Time
	inflight *pollRun

	startOnce sync.Once
	stop      context.CancelFunc
	done      chan struct{}
}

type pollRun struct {
	done chan struct{}
	err  error
}

func newPoller(what string, interval time.Duration, logger *slog.Logger, poll func(context.Context) error) *poller {
	return &poller{what: what, interval: interval, logger: logger, poll: poll, done: make(chan struct{})}
}

// refresh polls now, or joins the poll already running, and returns its
// error. ctx bounds the wait and, for a poll this call starts, the poll.
func (p *poller) refresh(ctx context.Context) error {
	p.mu.Lock()
	run := p.inflight
	if run == nil {
		run = &pollRun{done: make(chan struct{})}
		p.inflight = run
		p.mu.Unlock()
		err := p.poll(ctx)
		p.mu.Lock()
		run.err = err
		p.lastErr = err
		if err == nil {
			p.lastOK = time.Now()
		}
		p.inflight = nil
		p.mu.Unlock()
		close(run.done)
		return err
	}
	p.mu.Unlock()
	select {
	case <-run.done:
		return run.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *poller) last() (time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastOK, p.lastErr
}

func (p *poller) start() {
	p.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		p.stop = cancel
		go p.loop(ctx)
	})
}

func (p *poller) loop(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		if err := p.refresh(ctx); err != nil && ctx.Err() == nil {
			p.logger.Warn("iq: "+p.what+" poll failed; keeping the last good routing", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// close stops the loop and waits for it; safe without start and twice.
func (p *poller) close() {
	p.startOnce.Do(func() { close(p.done) }) // never started
	if p.stop != nil {
		p.stop()
	}
	<-p.done
}

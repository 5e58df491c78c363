// Package logwatch is a slog handler for tests that wait on a log record:
// its channel closes at the first Warn (or higher) record whose message
// holds a given text.
package logwatch

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Handler closes Warned at the first record at Warn or above whose
// message holds its text; it drops every record.
type Handler struct {
	want   string
	once   sync.Once
	warned chan struct{}
}

// New returns a Handler waiting for a Warn record whose message holds want.
func New(want string) *Handler {
	return &Handler{want: want, warned: make(chan struct{})}
}

// Warned is closed once such a record was logged.
func (h *Handler) Warned() <-chan struct{} { return h.warned }

// Logger is a logger writing to h.
func (h *Handler) Logger() *slog.Logger { return slog.New(h) }

// Enabled is true at Warn and above.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// Handle closes Warned when r's message holds the text.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) {
		h.once.Do(func() { close(h.warned) })
	}
	return nil
}

// WithAttrs returns h.
func (h *Handler) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h.
func (h *Handler) WithGroup(string) slog.Handler { return h }

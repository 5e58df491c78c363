package azdetect

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/azkafka/azkafka/internal/settings"
)

// MaxAZLength is the longest zone Validate accepts, in bytes.
const MaxAZLength = 128

// Validate trims surrounding whitespace from az and checks that the rest
// matches ^[a-z0-9-]{1,128}$, so that it cannot smuggle separators (',' or
// '=') into a client ID. It returns the trimmed zone, or an error matching
// ErrInvalidAZ that quotes the (truncated) value.
func Validate(az string) (string, error) {
	trimmed, err := validateAZ(az)
	if err != nil {
		return "", fmt.Errorf("azdetect: AZ %s: %w", quote(az), err)
	}
	return trimmed, nil
}

// validateAZ is Validate without the value in the message, for callers that
// name the source and quote the value themselves.
func validateAZ(az string) (string, error) {
	s := strings.TrimSpace(az)
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidAZ)
	}
	if len(s) > MaxAZLength {
		return "", fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidAZ, len(s), MaxAZLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' {
			continue
		}
		return "", fmt.Errorf("%w: byte %s at offset %d is not one of a-z, 0-9, '-'", ErrInvalidAZ, strconv.Quote(s[i:i+1]), i)
	}
	return s, nil
}

// quote returns v double-quoted and truncated to 64 bytes, for error
// messages about outside values.
func quote(v string) string { return settings.Quote(v) }

package frameguard

// limit.go holds the one parser of the response limit: the row of
// AZKAFKA_MAX_RESPONSE_BYTES in sdk's table (which iq's cluster source
// applies too) and the check of sdk.WithMaxResponseBytes.

import (
	"fmt"
	"strconv"

	"github.com/azkafka/azkafka/internal/settings"
)

// MinLimit is the least response limit accepted: 64 KiB.
const MinLimit = 64 << 10

// CheckLimit is the one check of a response limit, from the variable or
// an option.
func CheckLimit(n int) error {
	if n < MinLimit {
		return fmt.Errorf("want at least %d", MinLimit)
	}
	return nil
}

// LimitRow is the row of LimitVar for a package whose configuration is C:
// option and doc as in settings.Var, set stores the limit. Package sdk
// registers it in its table; package iq applies it unregistered, so that
// the variable is listed once and parsed one way.
func LimitRow[C any](option, doc string, set func(c *C, n int)) settings.Var[C] {
	return settings.Var[C]{Name: LimitVar, Default: settings.Code(DefaultMaxResponseBytes), Option: option, Doc: doc,
		Set: func(c *C, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("not an integer (want at least %d)", MinLimit)
			}
			if err := CheckLimit(n); err != nil {
				return err
			}
			set(c, n)
			return nil
		}}
}

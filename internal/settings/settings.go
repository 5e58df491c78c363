// Package settings is the one shape of the environment variables of
// azkafka's packages: each package (sdk, azdetect, iq) keeps a table of
// Var rows, and everything about a variable derives from its row —
// parsing and validation (Apply), the README's configuration table (Row,
// generated and checked by each package's test), the option docs (checked
// to name their variable) and what `azkafka env` lists (Register).
//
// Adding a setting to a package is one row in its table plus the option (Opt)
// that wins over it.
package settings

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Var is one environment variable of a package's configuration C.
type Var[C any] struct {
	// Name is the variable, e.g. "AZKAFKA_IQ_MAX_LAG".
	Name string
	// Default is the default as the README shows it: Code(DefaultX) for a
	// value, so that the README follows the constant, or words ("none",
	// "detected").
	Default string
	// Option is the option or Config field that wins over the variable,
	// e.g. "WithMaxLag" or "Config.Timeout"; its doc must name Name.
	Option string
	// Doc is the README's description, in Markdown; "" for a variable the
	// README names in prose instead of in the table (a platform's own).
	Doc string
	// Set parses v (trimmed of spaces, never blank) and applies it to c.
	// Its error says what is wanted; Apply adds the package, the variable
	// and the quoted value.
	Set func(c *C, v string) error
	// Takes is the set of the package's constructors whose clients read
	// the variable; 0: every one.
	Takes Ctors
	// Foreign marks a variable another system owns, which the package
	// reads as its owner does (WARPSTREAM_AVAILABILITY_ZONE, NODE_NAME,
	// ...): set to blanks, it is unset rather than an error.
	Foreign bool
}

// Code is v as a README table cell shows a value: `v`.
func Code(v any) string { return "`" + fmt.Sprint(v) + "`" }

// Row is the README table row of v: | `NAME` | default | doc |.
func (v Var[C]) Row() string { return "| `" + v.Name + "` | " + v.Default + " | " + v.Doc + " |" }

// Rows returns the README rows of the table's variables that have a Doc,
// in its order.
func Rows[C any](table []Var[C]) []string {
	var rows []string
	for _, v := range table {
		if v.Doc != "" {
			rows = append(rows, v.Row())
		}
	}
	return rows
}

// Apply reads every variable of table through lookup, in the table's
// order, and sets c with those that are set. Every variable is validated,
// also one an option will override: a broken environment is reported,
// never ignored. A variable set to blanks is an error (unless Foreign:
// then it is unset). The error joins one error per bad variable, each
// starting with pkg and naming the variable and its quoted value, e.g.
//
//	iq: AZKAFKA_IQ_MAX_LAG="abc": not a non-negative integer
//	iq: AZKAFKA_IQ_AZ_TAG is set but blank: unset it or give it a value
func Apply[C any](pkg string, table []Var[C], c *C, lookup func(string) (string, bool)) error {
	var errs []error
	for _, v := range table {
		if raw, ok := lookup(v.Name); ok {
			if _, err := v.apply(c, raw); err != nil {
				errs = append(errs, v.describe(pkg, raw, err))
			}
		}
	}
	return errors.Join(errs...)
}

// errBlank is the error of a variable set to blanks.
var errBlank = errors.New("set but blank: unset it or give it a value")

// apply sets c from raw, the variable's value as set: trimmed, then
// parsed by Set. A blank value is errBlank, or, for a Foreign variable,
// unset (set is false).
func (v Var[C]) apply(c *C, raw string) (set bool, err error) {
	val := strings.TrimSpace(raw)
	if val == "" {
		if v.Foreign {
			return false, nil
		}
		return false, errBlank
	}
	return true, v.Set(c, val)
}

// describe is Describe for v.
func (v Var[C]) describe(pkg, raw string, err error) error { return Describe(pkg, v.Name, raw, err) }

// Describe is err, the reason why the value raw of the variable name of
// package pkg is refused, as Apply reports it: naming the package, the
// variable and the quoted value, e.g.
//
//	iq: AZKAFKA_IQ_MAX_LAG="abc": not a non-negative integer
func Describe(pkg, name, raw string, err error) error {
	if err == errBlank {
		return fmt.Errorf("%s: %s is %w", pkg, name, err)
	}
	return fmt.Errorf("%s: %s=%s: %w", pkg, name, Quote(raw), err)
}

// LookupFromGetenv turns a getenv function into a lookup: "" is unset.
func LookupFromGetenv(getenv func(string) string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	}
}

// Quote returns s quoted for an error message, cut to 64 bytes (at a
// character boundary) with the length of the rest said.
func Quote(s string) string {
	const limit = 64
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("...(%d bytes)", len(s))
}

// ParseBool parses a boolean variable: true or false, in any case, and
// nothing else (not 1, t or yes), as its error says.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false (any case)")
}

// Entry is a registered variable, as `azkafka env` lists it.
type Entry struct {
	Package, Name, Default, Option, Doc string
	Foreign                             bool
	// Check checks raw, the variable's value as set, as Apply does: set is
	// false for a Foreign variable set to blanks (it counts as unset), and
	// reason says why the value is refused (Describe names the variable).
	Check func(raw string) (set bool, reason error)
}

var (
	registryMu sync.Mutex
	registry   []Entry
)

// Register records the table of package pkg for Entries; packages call it
// from init. newC returns the configuration a value is checked against.
// A variable belongs to one table: registering it twice panics.
func Register[C any](pkg string, table []Var[C], newC func() C) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, v := range table {
		if slices.ContainsFunc(registry, func(e Entry) bool { return e.Name == v.Name }) {
			panic("settings: " + pkg + " registers " + v.Name + ", which another table holds: apply that row instead")
		}
		registry = append(registry, Entry{Package: pkg, Name: v.Name, Default: v.Default, Option: v.Option,
			Doc: v.Doc, Foreign: v.Foreign, Check: func(raw string) (bool, error) {
				c := newC()
				return v.apply(&c, raw)
			}})
	}
}

// Entries returns every registered variable: the packages' tables in the
// order they registered, each in its own order. A variable belongs to one
// package's table (another package that reads it applies the owner's row
// without registering it), so each is listed once.
func Entries() []Entry {
	registryMu.Lock()
	defer registryMu.Unlock()
	return slices.Clone(registry)
}

package settings

// option.go holds the one shape of the packages' options (Opt), which
// win over the variables of the tables in settings.go: sdk and iq each
// wrap it in their exported Option interface.

import (
	"errors"
	"fmt"
	"strings"
)

// Ctors is a set of a package's constructors, one bit each; the package
// names the bits with a Constructors list.
type Ctors uint16

// Constructors names a package's constructors: element i names the
// constructor of bit 1<<i.
type Constructors []string

// Of names the constructors of set c, joined with " and ", e.g.
// "NewWriter and NewReader".
func (n Constructors) Of(c Ctors) string {
	var names []string
	for i, name := range n {
		if c&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, " and ")
}

// Opt is one option of a package whose configuration is C: its name, the
// constructors that take it, and what it sets.
type Opt[C any] struct {
	// Name is the option's function, e.g. "WithMaxLag", as the errors
	// name it.
	Name string
	// Takes is the set of constructors that take the option; given to
	// another, it is an error naming it, never silently ignored.
	Takes Ctors
	// Set applies the option's value to c. Its error says what is wrong
	// with the value and names the call, e.g. "WithMaxLag(-1): negative";
	// Apply adds the package.
	Set func(c *C) error
}

// ApplyOpts applies opts, in order (a later option wins over an earlier
// one), to c for the constructor to (one bit of names), and returns every
// problem joined, each starting with pkg, e.g.
//
//	sdk: NewReader: WithIdempotence is an option of NewWriter only
//	sdk: WithMaxConnRate(-1, 5): rate must be a finite number >= 0
//
// to 0 stands for a function that takes every option.
func ApplyOpts[C any](pkg string, names Constructors, to Ctors, c *C, opts []Opt[C]) error {
	var errs []error
	for _, o := range opts {
		if to != 0 && o.Takes&to == 0 {
			only := ""
			if o.Takes&(o.Takes-1) == 0 {
				only = " only"
			}
			errs = append(errs, fmt.Errorf("%s: %s: %s is an option of %s%s", pkg, names.Of(to), o.Name, names.Of(o.Takes), only))
			continue
		}
		if o.Set == nil {
			continue
		}
		if err := o.Set(c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pkg, err))
		}
	}
	return errors.Join(errs...)
}

// ApplyDefaults sets c from the defaults of table: each row whose Default
// is a value (Code(x)) is applied through its Set, as the variable set to
// x would be, so that a default and the variable share one parser. A
// default its own row refuses panics: the table is wrong.
func ApplyDefaults[C any](table []Var[C], c *C) {
	for _, v := range table {
		x, ok := strings.CutPrefix(v.Default, "`")
		if !ok {
			continue
		}
		x, ok = strings.CutSuffix(x, "`")
		if !ok {
			continue
		}
		if err := v.Set(c, x); err != nil {
			panic(fmt.Sprintf("settings: the default %s of %s is refused by its row: %v", v.Default, v.Name, err))
		}
	}
}

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/azkafka/azkafka/internal/settings"
	"github.com/azkafka/azkafka/sdk"
)

// envLookup and envEnviron are where `azkafka env` reads the environment;
// tests replace them.
var (
	envLookup  = os.LookupEnv
	envEnviron = os.Environ
)

const envUsage = `Usage: azkafka env [--json]

Lists every setting azkafka reads from the environment (the SDK's,
azdetect's, iq's and this command's AZKAFKA_* variables, then the
platform variables zone detection reads), each with its value here and
where that comes from ("env" or "default"), and checks every value set as
the package that reads it would. An AZKAFKA_* variable that no package
reads is named, with the closest known one.

With --json, prints an array of {"variable", "package", "source", "value",
"default", "option", "error"}; "option" is what wins over the variable.

Exit status: 0 every variable valid, 2 one is not or is unknown (each
named on stderr).
`

// envOutput is one variable of the --json array.
type envOutput struct {
	Variable string `json:"variable"`
	Package  string `json:"package"`
	Source   string `json:"source"` // env or default
	Value    string `json:"value"`
	Default  string `json:"default"`
	Option   string `json:"option"`
	Error    string `json:"error"`
}

// packageOrder is the order the listing shows the packages in: the
// README's.
var packageOrder = []string{"azdetect", "sdk", "iq", "azkafka"}

func runEnv(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("env", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	asJSON := flags.Bool("json", false, "")
	if err := flags.Parse(args); err == flag.ErrHelp {
		fmt.Fprint(stdout, envUsage)
		return exitOK
	} else if err != nil {
		return failUsage(stderr, "env", "env", "%s", flagError(flags, err))
	}
	if flags.NArg() > 0 {
		return failUsage(stderr, "env", "env", "unexpected argument %q", flags.Arg(0))
	}
	entries := settings.Entries()
	rank := func(e settings.Entry) int {
		r := slices.Index(packageOrder, e.Package)
		if e.Doc == "" { // the platforms' variables last
			r += len(packageOrder)
		}
		return r
	}
	slices.SortStableFunc(entries, func(a, b settings.Entry) int { return rank(a) - rank(b) })
	bad := 0
	out := make([]envOutput, 0, len(entries))
	for _, e := range entries {
		o := envOutput{Variable: e.Name, Package: e.Package, Source: "default", Value: strings.Trim(e.Default, "`"),
			Default: strings.Trim(e.Default, "`"), Option: e.Option}
		if raw, ok := envLookup(e.Name); ok {
			set, reason := e.Check(raw)
			if set || reason != nil { // a platform's variable set to blanks is unset
				o.Source, o.Value = "env", raw
			}
			if reason != nil {
				o.Error = reason.Error()
				bad++
				fmt.Fprintf(stderr, "azkafka env: %v\n", settings.Describe(e.Package, e.Name, raw, reason))
			}
			if e.Name == envSASLPassword && o.Source == "env" {
				o.Value = "(set)"
			}
		}
		out = append(out, o)
	}
	for _, err := range sdk.CheckEnv(envEnviron()) {
		bad++
		fmt.Fprintf(stderr, "azkafka env: %v (it is ignored)\n", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "VARIABLE\tPACKAGE\tSOURCE\tVALUE")
		for _, o := range out {
			v := o.Value
			if v == "" {
				v = "unset"
			}
			if o.Error != "" {
				v += "  (invalid: " + o.Error + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Variable, o.Package, o.Source, v)
		}
		tw.Flush()
	}
	if bad > 0 {
		return exitUsage
	}
	return exitOK
}

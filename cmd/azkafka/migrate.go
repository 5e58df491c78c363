package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/azkafka/azkafka/internal/migrate"
)

const migrateUsage = `Usage: azkafka migrate [-w] [-diff] [--dialers] [PACKAGES...]

Moves Go packages from kafka-go's Writer and Reader to the SDK's
(github.com/azkafka/azkafka/sdk), which have kafka-go's methods and
meaning. Run it in the module, on the packages to move (default ./...);
they must build first. Without -w it changes nothing and prints a unified
diff (-diff, the default) of what it would write.

Rewritten, in the packages given and their tests:
  kafka.NewReader(cfg)          sdk.MustNewReader(cfg)
  &kafka.Writer{...}            sdk.MustNewWriter(&kafka.Writer{...})
  *kafka.Writer, *kafka.Reader  *sdk.Writer, *sdk.Reader, in signatures,
                                fields, variables, interfaces and composite
                                types
  kafka.WriterStats,            sdk.WriterStats, sdk.ReaderStats (which
  kafka.ReaderStats             embed kafka-go's)
  imports                       sdk added; kafka-go removed when unused
With --dialers also &kafka.Dialer{...} and &kafka.Transport{...}, which
become sdk.MustNewAZAwareDialer(...) and sdk.MustNewTransport(...): kafka-go
clients on them keep kafka-go's engine, with the SDK's client ID,
connection policy and frame guard.

The Must constructors panic where sdk.NewReader and sdk.NewWriter return an
error: an invalid config (where kafka.NewReader panics too), option or
AZKAFKA_* variable. A second run changes nothing.

Refused: a package is left unchanged, and each site reported with its
position and the reason, when it
  - passes a *kafka.Writer or *kafka.Reader to a function of a package not
    given (another module) that takes one, or to package reflect;
  - puts one in a struct of a package not given;
  - reads a field of one (the SDK's types have no fields);
  - embeds one in a struct, or holds one by value;
and so is every package given that shares Writer or Reader values with a
package left unchanged.

Flags:
  -w         write the changes to the files
  -diff      print the unified diff (the default without -w)
  --dialers  also rewrite kafka.Dialer and kafka.Transport literals

Exit status: 0 done (sites left unchanged are listed on stderr), 1 the
packages do not build or a file could not be written, 2 bad flags.
`

func runMigrate(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("migrate", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	write := flags.Bool("w", false, "")
	diff := flags.Bool("diff", false, "")
	dialers := flags.Bool("dialers", false, "")
	rest, err := parseInterleaved(flags, args)
	if err == flag.ErrHelp {
		fmt.Fprint(stdout, migrateUsage)
		return exitOK
	}
	if err != nil {
		return failUsage(stderr, "migrate", "migrate", "%s", flagError(flags, err))
	}
	if len(rest) == 0 {
		rest = []string{"./..."}
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "azkafka migrate: %v\n", err)
		return exitFail
	}
	res, err := migrate.Run(migrate.Config{Dir: wd, Patterns: rest, Dialers: *dialers})
	if err != nil {
		fmt.Fprintf(stderr, "azkafka %v\n", err)
		return exitFail
	}
	if *diff || !*write {
		if err := res.WriteDiff(stdout, wd); err != nil {
			fmt.Fprintf(stderr, "azkafka migrate: %v\n", err)
			return exitFail
		}
	}
	if *write {
		if err := res.Write(); err != nil {
			fmt.Fprintf(stderr, "azkafka migrate: %v\n", err)
			return exitFail
		}
	}
	for _, s := range res.Refused {
		fmt.Fprintln(stderr, s)
	}
	verb := "would rewrite"
	if *write {
		verb = "rewrote"
	}
	fmt.Fprintf(stderr, "azkafka migrate: %s %d sites in %d files; %d sites left unchanged\n", verb, res.Rewrites, len(res.Files), len(res.Refused))
	return exitOK
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/azkafka/azkafka/azdetect"
)

// detectGetenv is where `azkafka detect` reads its environment; tests
// replace it so that nothing but loopback fakes is ever asked.
var detectGetenv = os.Getenv

const detectUsage = `Usage: azkafka detect [--json]

Detects the availability zone this process would use, as the azkafka SDK
does at start-up: an explicit AZKAFKA_AZ (or WARPSTREAM_AVAILABILITY_ZONE)
wins; otherwise the ECS, EC2, GCP, Azure and Kubernetes metadata sources are
asked in parallel within one budget, AZKAFKA_DETECT_TIMEOUT (default 1s),
and the highest-ranked valid answer wins: at once when every higher-ranked source
has failed, else when the budget ends (sources still silent then are shown
as cut by the budget).

Prints the zone, its source, the time taken and every provider's outcome.
With --json, prints one object: {"az", "source", "elapsed_ms",
"providers": [{"name", "az", "error", "elapsed_ms"}]}; "az", "source" and
"error" are "" when absent.

Environment: AZKAFKA_AZ, WARPSTREAM_AVAILABILITY_ZONE, AZKAFKA_AZ_FORMAT
(name|id), AZKAFKA_DETECT_PROVIDERS (e.g. env,ec2), AZKAFKA_DETECT_TIMEOUT,
ECS_CONTAINER_METADATA_URI_V4, AWS_EC2_METADATA_SERVICE_ENDPOINT,
AWS_EC2_METADATA_DISABLED, GCE_METADATA_HOST, AZKAFKA_AZURE_IMDS_ENDPOINT,
KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, NODE_NAME,
AZKAFKA_K8S_TOKEN_FILE, AZKAFKA_K8S_CA_FILE.

Exit status: 0 a zone was found, 1 none was, 2 usage or configuration error.
`

// detectOutput is the --json document.
type detectOutput struct {
	AZ        string           `json:"az"`
	Source    string           `json:"source"`
	ElapsedMS float64          `json:"elapsed_ms"`
	Providers []providerOutput `json:"providers"`
}

type providerOutput struct {
	Name      string  `json:"name"`
	AZ        string  `json:"az"`
	Error     string  `json:"error"`
	ElapsedMS float64 `json:"elapsed_ms"`
}

func milliseconds(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

func runDetect(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, detectUsage)
			return exitOK
		}
	}
	flags := flag.NewFlagSet("detect", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	asJSON := flags.Bool("json", false, "print the outcome as JSON")
	if err := flags.Parse(args); err != nil {
		return failUsage(stderr, "detect", "detect", "%s", flagError(flags, err))
	}
	if flags.NArg() > 0 {
		return failUsage(stderr, "detect", "detect", "unexpected argument %q", flags.Arg(0))
	}

	cfg, err := azdetect.ConfigFromEnv(detectGetenv)
	if err != nil {
		fmt.Fprintf(stderr, "azkafka detect: %v\n", err)
		return exitUsage
	}
	res, err := azdetect.New(cfg).Detect(context.Background())
	out := detectOutput{AZ: res.AZ, Source: res.Source, ElapsedMS: milliseconds(res.Elapsed), Providers: []providerOutput{}}
	providers := res.Providers
	var de *azdetect.DetectError
	if errors.As(err, &de) {
		if de.Config != nil {
			fmt.Fprintf(stderr, "azkafka detect: %v\n", de.Config)
			return exitUsage
		}
		providers, out.ElapsedMS = de.Providers, milliseconds(de.Elapsed)
	}
	for _, p := range providers {
		po := providerOutput{Name: p.Name, AZ: p.AZ, ElapsedMS: milliseconds(p.Elapsed)}
		if p.Err != nil {
			po.Error = p.Err.Error()
		}
		out.Providers = append(out.Providers, po)
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "azkafka detect: %v\n", err)
			return exitFail
		}
	} else {
		printDetect(stdout, out)
	}
	if err != nil {
		if !*asJSON {
			fmt.Fprintln(stderr, "azkafka detect: no availability zone found")
		}
		return exitFail
	}
	return exitOK
}

func printDetect(w io.Writer, out detectOutput) {
	az, source := out.AZ, out.Source
	if az == "" {
		az, source = "(none)", "-"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "az:\t%s\n", az)
	fmt.Fprintf(tw, "source:\t%s\n", source)
	fmt.Fprintf(tw, "elapsed:\t%.3f ms\n", out.ElapsedMS)
	tw.Flush()
	if len(out.Providers) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tELAPSED\tOUTCOME")
	for _, p := range out.Providers {
		outcome := p.AZ
		if p.Error != "" {
			outcome = p.Error
		}
		fmt.Fprintf(tw, "%s\t%.3f ms\t%s\n", p.Name, p.ElapsedMS, outcome)
	}
	tw.Flush()
}

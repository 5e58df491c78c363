package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/iq"
)

const iqUsage = `Usage: azkafka iq route (--bootstrap HOST:PORT --application-id APP | --metadata-url URL)
                        --store STORE [flags] KEY
       azkafka iq describe --bootstrap HOST:PORT --application-id APP [--json]

route shows where Kafka Streams keeps KEY of STORE and which instances an iq
client would query, in order, computed as Java's
KafkaStreams.queryMetadataForKey does. The routing comes either from the
application's consumer group on the brokers (--bootstrap and
--application-id: no code on the Java side; standby lags are upper bounds)
or from the application's metadata endpoint (--metadata-url: the JSON
document of the iq package documentation, read also from every other
instance it lists, since lags and zones are known only by each instance).

Prints the partition, the active instance, the standbys with their zone and
lag (current, end and lag offsets; "<=" marks an upper bound), and the order
the selection policy chose with the reason any replica was left out.

describe prints the routing table read from the group: protocol, group
state, members, each store's source topics (or why the group cannot tell
them), and per instance its zone and active and standby partitions per
store with the standby lag bound.

Flags:
  --bootstrap LIST    brokers, host:port[,host:port...]
  --application-id A  the Kafka Streams application.id (its group)
  --store-topics S=T  the source topics of store S, T a comma-separated list
                      (iq.WithStoreTopics); repeatable; for stores the group
                      cannot map
` + securityUsage + `  --metadata-url URL  the metadata endpoint of one instance
  --store STORE       the state store name (required by route)
  --key-serde S       string (default), int32 or int64, as in the Java app
  --allow-standby     let the policy choose standbys and restoring actives
                      (default: AZKAFKA_IQ_ALLOW_STANDBY, else false)
  --max-lag N         largest lag in offsets of a chosen replica
                      (default: AZKAFKA_IQ_MAX_LAG, else 10000)
  --az ZONE           the caller's availability zone (default: detected,
                      as "azkafka detect" does, when --allow-standby)
  --timeout D         budget for reading the metadata (default 5s)
  --json              print one JSON object: {"store", "key", "partition",
                      "active": replica|null, "standbys": [replica],
                      "order": [replica], "allow_standby", "max_lag",
                      "caller_az", "error"}; a replica is {"host", "az",
                      "role": "active"|"standby", "lag": {"current", "end",
                      "lag"}|null}

Exit status: 0 a replica to query was found (route) or the group was read
(describe), 1 none (metadata unavailable, no active and no eligible
standby, group not readable), 2 usage or configuration error.
`

// iqLookupEnv is where `azkafka iq` reads its environment; tests replace it.
var iqLookupEnv = os.LookupEnv

func runIQ(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return failUsage(stderr, "iq", "iq", "want a subcommand: route or describe")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, iqUsage)
		return exitOK
	case "route":
		return runIQRoute(args[1:], stdout, stderr)
	case "describe":
		return runIQDescribe(args[1:], stdout, stderr)
	}
	return failUsage(stderr, "iq", "iq", "unknown subcommand %q (want route or describe)", args[0])
}

type replicaOutput struct {
	Host string     `json:"host"`
	AZ   string     `json:"az"`
	Role string     `json:"role"`
	Lag  *lagOutput `json:"lag"`
}

type lagOutput struct {
	Current int64 `json:"current"`
	End     int64 `json:"end"`
	Lag     int64 `json:"lag"`
	// Bound is true when lag is an upper bound (the cluster source).
	Bound bool `json:"bound,omitempty"`
}

type routeOutput struct {
	Store        string          `json:"store"`
	Key          string          `json:"key"`
	Partition    int             `json:"partition"`
	Active       *replicaOutput  `json:"active"`
	Standbys     []replicaOutput `json:"standbys"`
	Order        []replicaOutput `json:"order"`
	AllowStandby bool            `json:"allow_standby"`
	MaxLag       int64           `json:"max_lag"`
	CallerAZ     string          `json:"caller_az"`
	Error        string          `json:"error"`
}

func replicaOut(r iq.Replica) replicaOutput {
	o := replicaOutput{Host: r.HostInfo.String(), AZ: r.AZ, Role: "standby"}
	if r.Active {
		o.Role = "active"
	}
	if r.LagKnown {
		o.Lag = &lagOutput{r.Lag.Current, r.Lag.End, r.Lag.Lag, r.Lag.Bound}
	}
	return o
}

// runIQRoute runs `azkafka iq route`.
func runIQRoute(args []string, stdout, stderr io.Writer) int {
	f, code := parseIQRoute(args, stdout, stderr)
	if f == nil {
		return code
	}
	key, err := serializeKey(f.serde, f.key)
	if err != nil {
		return routeUsage(stderr, "%v", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	opts, code := f.options(quiet, stderr)
	if opts == nil {
		return code
	}
	src, httpSrc, err := f.source(quiet)
	if err != nil {
		return routeUsage(stderr, "%v", err)
	}
	defer src.Close()
	client, err := iq.NewClient(src, opts...)
	if err != nil {
		return routeUsage(stderr, "%v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	if err := src.Refresh(ctx); err != nil {
		fmt.Fprintf(stderr, "azkafka iq route: %v\n", err)
		return exitFail
	}
	if httpSrc {
		_ = src.Refresh(ctx) // a second poll reaches the instances the first one listed; the first result stays if it fails
	}
	out, rerr := queryRoute(ctx, client, f.store, f.key, key)
	return writeRoute(stdout, stderr, out, rerr, f.asJSON)
}

// routeFlags is the command line of `azkafka iq route`.
type routeFlags struct {
	metaURL string
	cf      clusterFlags
	store   string
	serde   string
	allow   string // --allow-standby, "" when not given
	maxLag  string // --max-lag, "" when not given
	az      string
	azSet   bool // --az was given, even empty
	timeout time.Duration
	asJSON  bool
	key     string // KEY as given
}

// routeUsage reports a usage error of `azkafka iq route` and returns
// exitUsage.
func routeUsage(stderr io.Writer, format string, a ...any) int {
	return failUsage(stderr, "iq route", "iq", format, a...)
}

// register defines the flags of `azkafka iq route` on fs.
func (f *routeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.metaURL, "metadata-url", "", "")
	f.cf.register(fs)
	fs.StringVar(&f.store, "store", "", "")
	fs.StringVar(&f.serde, "key-serde", "string", "")
	fs.StringVar(&f.allow, "allow-standby", "", "")
	fs.StringVar(&f.maxLag, "max-lag", "", "")
	fs.StringVar(&f.az, "az", "", "")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "")
	fs.BoolVar(&f.asJSON, "json", false, "")
}

// parseIQRoute parses the command line of `azkafka iq route`. On --help or
// a usage error it prints and returns nil and the exit status.
func parseIQRoute(args []string, stdout, stderr io.Writer) (*routeFlags, int) {
	f := &routeFlags{}
	flags := flag.NewFlagSet("iq route", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	f.register(flags)
	// --allow-standby is a boolean that may stand alone.
	for i, a := range args {
		if a == "--allow-standby" || a == "-allow-standby" {
			args[i] = "--allow-standby=true"
		}
	}
	rest, err := parseInterleaved(flags, args)
	if err == flag.ErrHelp {
		fmt.Fprint(stdout, iqUsage)
		return nil, exitOK
	}
	switch {
	case err != nil:
		return nil, routeUsage(stderr, "%s", flagError(flags, err))
	case f.metaURL == "" && f.cf.bootstrap == "":
		return nil, routeUsage(stderr, "--bootstrap and --application-id, or --metadata-url, are required")
	case f.metaURL != "" && f.cf.bootstrap != "":
		return nil, routeUsage(stderr, "--metadata-url and --bootstrap: give one source")
	case f.store == "":
		return nil, routeUsage(stderr, "--store is required")
	case len(rest) != 1:
		return nil, routeUsage(stderr, "want exactly one KEY, got %d arguments", len(rest))
	case f.timeout <= 0:
		return nil, routeUsage(stderr, "--timeout %s: must be positive", f.timeout)
	}
	f.key = rest[0]
	flags.Visit(func(fl *flag.Flag) {
		if fl.Name == "az" {
			f.azSet = true
		}
	})
	return f, exitOK
}

// options returns the options of the iq client: quiet logging, the
// environment of iqLookupEnv, then the policy flags. On a bad flag it
// prints the usage error and returns nil and the exit status.
func (f *routeFlags) options(quiet *slog.Logger, stderr io.Writer) ([]iq.Option, int) {
	opts := []iq.Option{iq.WithLookupEnv(iqLookupEnv), iq.WithLogger(quiet)}
	if f.allow != "" {
		b, err := strconv.ParseBool(f.allow)
		if err != nil {
			return nil, routeUsage(stderr, "--allow-standby=%s: not a boolean", strconv.Quote(f.allow))
		}
		opts = append(opts, iq.WithAllowStandby(b))
	}
	if f.maxLag != "" {
		n, err := strconv.ParseInt(f.maxLag, 10, 64)
		if err != nil || n < 0 {
			return nil, routeUsage(stderr, "--max-lag %s: not a non-negative integer", strconv.Quote(f.maxLag))
		}
		opts = append(opts, iq.WithMaxLag(n))
	}
	if f.azSet {
		opts = append(opts, iq.WithAZ(f.az))
	}
	return opts, exitOK
}

// source returns the metadata source the flags name: the endpoint of
// --metadata-url (httpSrc) or the group of --bootstrap.
func (f *routeFlags) source(quiet *slog.Logger) (src *iq.Source, httpSrc bool, err error) {
	if f.metaURL != "" {
		src, err = iq.NewHTTPSource([]string{f.metaURL}, iq.WithLookupEnv(iqLookupEnv), iq.WithPollTimeout(f.timeout), iq.WithLogger(quiet))
		return src, true, err
	}
	src, err = f.cf.source(f.timeout, quiet)
	return src, false, err
}

// queryRoute computes where client finds key (keyText as given) of store, and
// which replicas it would query, in order; the error is the one of
// client.Candidates, also in the output.
func queryRoute(ctx context.Context, client *iq.Client, store, keyText string, key []byte) (routeOutput, error) {
	policy := iqinspect.PolicyOf(client)
	out := routeOutput{Store: store, Key: keyText, AllowStandby: policy.AllowStandby, MaxLag: policy.MaxLag,
		Standbys: []replicaOutput{}, Order: []replicaOutput{}}
	rt, order, rerr := client.Candidates(ctx, store, key, nil)
	out.Partition = rt.Partition
	if rt.Active != nil {
		a := replicaOut(*rt.Active)
		out.Active = &a
	}
	for _, s := range rt.Standbys {
		out.Standbys = append(out.Standbys, replicaOut(s))
	}
	for _, r := range order {
		out.Order = append(out.Order, replicaOut(r))
	}
	if policy.AllowStandby {
		out.CallerAZ = policy.CallerAZ(ctx)
	}
	if rerr != nil {
		out.Error = rerr.Error()
	}
	return out, rerr
}

// writeRoute prints out, as JSON or as text, and returns the exit status:
// exitFail when rerr is set or out has no replica to query, with rerr on
// stderr unless asJSON.
func writeRoute(stdout, stderr io.Writer, out routeOutput, rerr error, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		printRoute(stdout, out)
	}
	if rerr != nil || len(out.Order) == 0 {
		if !asJSON {
			fmt.Fprintf(stderr, "azkafka iq route: %v\n", rerr)
		}
		return exitFail
	}
	return exitOK
}

func printRoute(w io.Writer, o routeOutput) {
	fmt.Fprintf(w, "store %s, key %s: partition %d\n", o.Store, strconv.Quote(o.Key), o.Partition)
	if o.Active != nil {
		fmt.Fprintf(w, "active:   %s\n", describeReplica(*o.Active))
	} else {
		fmt.Fprintln(w, "active:   none (not available: starting or rebalancing)")
	}
	if len(o.Standbys) == 0 {
		fmt.Fprintln(w, "standbys: none")
	}
	for i, s := range o.Standbys {
		label := "standbys:"
		if i > 0 {
			label = "         "
		}
		fmt.Fprintf(w, "%s %s\n", label, describeReplica(s))
	}
	policy := "active only"
	if o.AllowStandby {
		policy = fmt.Sprintf("standbys allowed, max lag %d", o.MaxLag)
		if o.CallerAZ != "" {
			policy += ", caller zone " + o.CallerAZ
		} else {
			policy += ", caller zone unknown"
		}
	}
	fmt.Fprintf(w, "policy:   %s\n", policy)
	if len(o.Order) == 0 {
		fmt.Fprintln(w, "order:    none")
	}
	for i, r := range o.Order {
		fmt.Fprintf(w, "order %d:  %s (%s)\n", i+1, r.Host, r.Role)
	}
}

func describeReplica(r replicaOutput) string {
	var b strings.Builder
	b.WriteString(r.Host)
	if r.AZ != "" {
		fmt.Fprintf(&b, " az %s", r.AZ)
	}
	switch {
	case r.Lag != nil && r.Lag.Bound:
		fmt.Fprintf(&b, " lag <=%d (offset sum at join %d, changelog ends %d)", r.Lag.Lag, r.Lag.Current, r.Lag.End)
	case r.Lag != nil:
		fmt.Fprintf(&b, " lag %d (current %d, end %d)", r.Lag.Lag, r.Lag.Current, r.Lag.End)
	default:
		b.WriteString(" lag unknown")
	}
	return b.String()
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/sdk"
)

// clientIDGetenv and clientIDDetect are where `azkafka clientid` reads its
// environment and detects the zone; tests replace them so that no metadata
// service is ever asked.
var (
	clientIDGetenv                                                 = os.Getenv
	clientIDEnviron                                                = os.Environ // for the unknown-variable check
	clientIDDetect  func(context.Context) (azdetect.Result, error) = nil        // nil: the SDK's default
)

const clientIDUsage = `Usage: azkafka clientid [--json] [--acks all|one|none]

Prints the Kafka client ID a client built with the azkafka SDK would send
from this process, with this environment:

  [<user id>,]warpstream_session_id=<uuid>,warpstream_az=<az>,warpstream_interzone_lb=true

The session ID is new at each run unless AZKAFKA_SESSION_ID sets it. The AZ
comes from AZKAFKA_AZ (or WARPSTREAM_AVAILABILITY_ZONE), else from detection
(see azkafka detect); when it is unknown the warpstream_az pair is left out
and a warning is printed on stderr.

With --json, prints one object: {"client_id", "session_id", "az",
"az_source", "interzone_lb", "writer_idempotent", "writer_idempotence",
"reader_fetch_from_follower", "reader_group_protocol"};
"az" and "az_source" are "" when unknown. "writer_idempotent" says whether
an sdk.Writer with RequiredAcks --acks (default all) would produce
idempotently, and "writer_idempotence" why (the setting that decided, or
auto and the acks); the cluster can still refuse a producer ID.
"reader_fetch_from_follower" says whether an sdk.Reader would fetch from
the replica in the AZ, "reader_group_protocol" its group protocol.

Environment: AZKAFKA_CLIENT_ID, AZKAFKA_SESSION_ID, AZKAFKA_INTERZONE_LB,
AZKAFKA_IDEMPOTENCE, AZKAFKA_FETCH_FROM_FOLLOWER, AZKAFKA_GROUP_PROTOCOL,
AZKAFKA_AZ and the detection variables; the other AZKAFKA_* variables of the
SDK are validated too.

Exit status: 0 printed, 2 usage or configuration error.
`

// clientIDOutput is the --json document.
type clientIDOutput struct {
	ClientID    string `json:"client_id"`
	SessionID   string `json:"session_id"`
	AZ          string `json:"az"`
	AZSource    string `json:"az_source"`
	InterzoneLB bool   `json:"interzone_lb"`
	// WriterIdempotent and WriterIdempotence: see sdk.WriterIdempotence.
	WriterIdempotent  bool   `json:"writer_idempotent"`
	WriterIdempotence string `json:"writer_idempotence"`
	// ReaderFetchFromFollower and ReaderGroupProtocol: see
	// sdk.Identity.
	ReaderFetchFromFollower bool   `json:"reader_fetch_from_follower"`
	ReaderGroupProtocol     string `json:"reader_group_protocol"`
}

// acksByName are the --acks values.
var acksByName = map[string]kafka.RequiredAcks{"all": kafka.RequireAll, "one": kafka.RequireOne, "none": kafka.RequireNone}

func runClientID(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, clientIDUsage)
			return exitOK
		}
	}
	flags := flag.NewFlagSet("clientid", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	asJSON := flags.Bool("json", false, "print the client ID and its parts as JSON")
	acksName := flags.String("acks", "all", "RequiredAcks of the Writer whose idempotence --json reports: all, one or none")
	if err := flags.Parse(args); err != nil {
		return failUsage(stderr, "clientid", "clientid", "%s", flagError(flags, err))
	}
	if flags.NArg() > 0 {
		return failUsage(stderr, "clientid", "clientid", "unexpected argument %q", flags.Arg(0))
	}
	acks, ok := acksByName[*acksName]
	if !ok {
		return failUsage(stderr, "clientid", "clientid", "--acks=%q: want all, one or none", *acksName)
	}
	opts := []sdk.Option{
		sdk.WithGetenv(clientIDGetenv),
		// The SDK's unknown-AZ warning is reported below, in this
		// command's own words.
		sdk.WithLogger(slog.New(slog.DiscardHandler)),
	}
	if clientIDDetect != nil {
		opts = append(opts, sdk.WithDetector(clientIDDetect))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := sdk.ResolveIdentity(ctx, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "azkafka clientid: invalid configuration: %v\n", err)
		return exitUsage
	}
	if id.AZ == "" {
		fmt.Fprintf(stderr, "azkafka clientid: warning: availability zone unknown, the client ID has no warpstream_az pair: %v\n", id.AZError)
	}
	for _, err := range sdk.CheckEnv(clientIDEnviron()) {
		fmt.Fprintf(stderr, "azkafka clientid: warning: %v (it is ignored)\n", err)
	}
	idempotent, why, err := sdk.WriterIdempotence(acks, opts...)
	if err != nil {
		why = "NewWriter would fail: " + err.Error()
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(clientIDOutput{
			ClientID: id.ClientID, SessionID: id.SessionID, AZ: id.AZ, AZSource: id.AZSource, InterzoneLB: id.InterzoneLB,
			WriterIdempotent: idempotent, WriterIdempotence: why,
			ReaderFetchFromFollower: id.FetchFromFollower, ReaderGroupProtocol: string(id.GroupProtocol),
		}); err != nil {
			fmt.Fprintf(stderr, "azkafka clientid: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	fmt.Fprintln(stdout, id.ClientID)
	return exitOK
}

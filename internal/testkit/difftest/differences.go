package difftest

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Difference is a row of the table of intended differences from kafka-go:
// what differs, why, and which observations it covers.
type Difference struct {
	// ID names the row in test output.
	ID string
	// What says what a kafka-go program sees differently.
	What string
	// Why says why the SDK differs.
	Why string
	// Scenario and Step are patterns of the scenarios and steps the row
	// covers, where * stands for any text (slashes too) and | separates
	// alternatives.
	Scenario, Step string
	// Match, when set, must also accept the two observations.
	Match func(kafkaGo, sdk string) bool
	// Embedded: the row covers a difference of the in-process broker
	// (kfake) from Apache Kafka, not of the SDK from kafka-go.
	Embedded bool
}

// Differences is the table of intended differences; the sdk package doc
// prints it (TestDifferencesInSDKDoc keeps them the same).
var Differences = []Difference{
	{
		ID:       "kfake-deleted-topic-commit",
		What:     "On the in-process broker only: after a group's topic is deleted, kafka-go's commit by topic name is refused (UNKNOWN_TOPIC_OR_PARTITION), where Kafka 4.3.1 takes it; the SDK drops the deleted topic's offsets on both.",
		Why:      "franz-go's kfake checks the topic of a commit; Apache Kafka does not for commits by name.",
		Scenario: "reader/group/deleted-topic", Step: "ReadMessage 1 after delete*",
		Embedded: true,
		Match: func(k, s string) bool {
			return strings.Contains(k, "kafka.Error(3 ") && s == "nil (returns)" || k == "none" && strings.HasPrefix(s, "topic=")
		},
	}, {
		ID:       "canceled-ctx-stores-nothing",
		What:     "WriteMessages called with a ctx that has already ended returns ctx's error and stores nothing, in async mode too.",
		Why:      "kafka-go returns ctx's error too (in async mode, nil or ctx's error, at random), but once it has the topic's partitions cached it has queued the messages and stores them: a caller that retries writes them twice.",
		Scenario: "writer/canceled-*", Step: "stored",
		Match: func(k, s string) bool { return strings.Contains(k, `"never"`) && !strings.Contains(s, `"never"`) },
	},
	{
		ID:       "close-is-bounded",
		What:     "Writer.Close waits at most kafka.Writer.WriteTimeout for the messages of async calls and of calls still waiting; those it gives up on fail with an error matching context.DeadlineExceeded (Completion gets them with Topic and Partition set).",
		Why:      "kafka-go's Close waits until every batch is written or has failed MaxAttempts times, each attempt taking up to WriteTimeout: minutes against a broker that does not answer, longer than a pod's grace period.",
		Scenario: "writer/close-*",
		Step:     "*",
		Match: func(k, s string) bool {
			return strings.Contains(s, "context.DeadlineExceeded") && (strings.Contains(k, "context.DeadlineExceeded") || strings.Contains(k, "*net.OpError"))
		},
	},
	{
		ID:       "commit-after-close",
		What:     "Reader.CommitMessages after Close returns io.ErrClosedPipe at once.",
		Why:      "kafka-go's blocks until its ctx ends: the commit can never be made.",
		Scenario: "reader/*", Step: "CommitMessages after Close",
		Match: func(k, s string) bool {
			return strings.Contains(k, "waits for ctx") && strings.Contains(s, "io.ErrClosedPipe")
		},
	},
	{
		ID:       "close-commit-refused",
		What:     "With a GroupID and CommitInterval > 0, Reader.Close returns the error of the commit it makes of the marked offsets when the commit fails (and an error when the cluster did not answer within ReaderCloseTimeout, or when marked offsets were dropped uncommitted earlier because the group took their partitions away: the session expired, or a rebalance's commit failed).",
		Why:      "kafka-go's Close always returns nil and only logs the failed commit to ErrorLogger: a service cannot tell at shutdown that the messages it read since the last commit will be read again by the partition's next owner.",
		Scenario: "reader/group/close-commit-refused", Step: "Close",
		Match: func(k, s string) bool {
			return k == "nil" && strings.HasPrefix(s, "error{kafka.Error(30 ") // the refusal's GROUP_AUTHORIZATION_FAILED
		},
	},
	{
		ID:       "reads-on-ended-ctx",
		What:     "Reader.FetchMessage and ReadMessage called with a ctx that has already ended return ctx's error and hand out nothing, also while messages are queued: the next call gets them.",
		Why:      "kafka-go's chooses at random between the ended ctx and its queue, so about half such calls hand out a queued message; its ReadMessage then fails that message's commit on the same ctx and returns an empty Message, and the message is not handed out again.",
		Scenario: "reader/ended-ctx", Step: "*ended ctx*",
		Match: func(k, s string) bool {
			return s == "handed out any=false errors=map[error{context.Canceled}:true]" || s == "nil (returns)" || strings.Contains(s, " offset=1 ")
		},
	},
	{
		ID:       "reads-after-close",
		What:     "Reader.FetchMessage and ReadMessage after Close return io.EOF at once.",
		Why:      "kafka-go's hand out what its queue still holds (with a group, messages whose commits fail: the Reader has left), then wait for ctx; io.EOF is what its doc gives for a closed Reader.",
		Scenario: "reader/fetch-after-close", Step: "FetchMessage after Close*",
		Match: func(k, s string) bool {
			return (strings.Contains(s, "io.EOF") || s == "none") && !strings.Contains(k, "io.EOF")
		},
	},
	{
		ID:       "readlag-after-close",
		What:     "Reader.ReadLag after Close returns an error.",
		Why:      "The Reader's connections are closed; kafka-go's dials the partition's leader again.",
		Scenario: "reader/*", Step: "ReadLag after Close",
		Match: func(k, s string) bool { return k == "nil (returns)" && strings.HasPrefix(s, "error") },
	},
	{
		ID:       "group-lag",
		What:     "With a GroupID, Reader.ReadLag returns the summed lag of the partitions the Reader owns (0 before it owns any), and Lag, Offset and Stats' Lag and Offset give values once they are known (Lag: the sum; Offset: the position when it owns exactly one partition, else -1), where kafka-go's ReadLag returns an error, Lag and Offset -1, and Stats' Lag and Offset those of whichever partition it fetched last (a gauge no caller can attribute).",
		Why:      "A group member's lag is what a consumer's operators watch (segmentio/kafka-go#508, #862, #1163); Assignment gives it per partition. Before anything is known the values are kafka-go's.",
		Scenario: "reader/group/*", Step: "ReadLag*|Offset after fetching|Lag after fetching",
		Match: func(k, s string) bool {
			n, err := strconv.ParseInt(s, 10, 64)
			return strings.HasPrefix(k, "error") && s == "nil (returns)" || k == "-1" && err == nil && n >= 0
		},
	},
	{
		ID:       "readmessage-keeps-message",
		What:     "ReadMessage whose commit fails returns the message it fetched together with the error.",
		Why:      "The caller can still process it (the commit may have been stored); kafka-go returns an empty Message, and the message is not handed out again.",
		Scenario: "reader/group/*", Step: "ReadMessage * message",
		Match: func(k, s string) bool { return k == "none" && s != "none" },
	},
	{
		ID:       "no-transaction-markers",
		What:     "The Reader hands out no transaction markers (the control records that commit or abort a transaction), and with IsolationLevel ReadCommitted no records of aborted transactions; offsets that hold them are passed over: a read that takes a marker moves the position past it (Offset, Lag, ReadLag) and ReadMessage commits past it, as kafka-go's does for the marker it hands out.",
		Why:      "kafka-go v0.4.51 hands out each marker as a message (a 4-byte key and, on Apache Kafka, a 6-byte value, at the marker's offset) and, under ReadCommitted, the aborted records too: neither is data a producer committed. Kafka's Java consumer and franz-go skip both.",
		Scenario: "reader/*/transaction-markers", Step: "read *",
		Match: func(k, s string) bool {
			// "<isolation>: key, ...": read_uncommitted loses the
			// markers only, read_committed the aborted records too.
			level, k, _ := strings.Cut(k, ": ")
			s = strings.TrimPrefix(s, level+": ")
			if level == "read_uncommitted" {
				return withoutMarkers(k) == s
			}
			return subsequence(strings.Split(s, ", "), strings.Split(withoutMarkers(k), ", "))
		},
	},
	{
		ID:       "log-append-time",
		What:     "On a topic whose message.timestamp.type is LogAppendTime, Message.Time is the time the broker appended the message.",
		Why:      "That is the record's timestamp on such a topic, as Kafka's Java consumer gives it; kafka-go v0.4.51 ignores the batch's timestamp type and gives the time the producer wrote.",
		Scenario: "reader/partition/log-append-time", Step: "FetchMessage message",
		Match: func(k, s string) bool {
			written := " time=" + fixedTime.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			return strings.HasSuffix(k, written) && strings.HasSuffix(s, " time=now") &&
				strings.TrimSuffix(k, written) == strings.TrimSuffix(s, " time=now")
		},
	},
	{
		ID:       "constructors-return-errors",
		What:     "NewReader and NewWriter return an error for an invalid configuration, naming the field.",
		Why:      "kafka.NewReader panics, and kafka-go's Writer fails on its first call; an error at construction is what a service can report.",
		Scenario: "*", Step: "NewReader*",
		Match: func(k, s string) bool { return k == "new panic" && s == "new error" },
	},
	{
		ID:       "engine-limits-at-construction",
		What:     "NewReader also returns an error, naming the field and why, for the values its engine cannot honour (the sdk.MustNewReader doc lists them): a SessionTimeout or RebalanceTimeout below 100ms, a HeartbeatInterval above SessionTimeout, a negative CommitInterval with a GroupID, a MaxWait beyond the fetch request's int32 of milliseconds, a MaxBytes above 715827883 (a response may exceed it by half; the engine reads at most 1 GiB).",
		Why:      "kafka-go's Reader starts with them and then fails on every join (Kafka refuses a session below group.min.session.timeout.ms, 6 s by default), lets its session expire between heartbeats, panics in its commit loop or overflows the request: an error at construction says what is wrong.",
		Scenario: "reader/invalid-config", Step: "NewReader engine: *",
		Match: func(k, s string) bool { return k == "new nil" && s == "new error" },
	},
	{
		ID:       "completion-partition-at-acks-0",
		What:     "Under RequireNone, the messages Completion gets carry the Topic and Partition they were written to, as under the other acks (Offset stays as given: the broker answers none).",
		Why:      "kafka-go's Completion gets them under RequireNone as the caller gave them (Topic empty when the Writer has it, Partition 0), which tells the callback nothing.",
		Scenario: "writer/async-completion", Step: "Completion acks=0",
		Match: func(k, s string) bool {
			return slices.Equal(withoutPlacement(k), withoutPlacement(s))
		},
	},
	{
		ID:       "completion-topic-without-response",
		What:     "A message that fails before any broker answered for it (its Balancer chose a partition the topic lacks) reaches Completion with the Topic it was written to, as every other message does.",
		Why:      "kafka-go sets Topic, Partition and Offset from a produce response only, so such a message reaches its Completion as the caller gave it (Topic empty when the Writer has it): the callback cannot tell which topic failed.",
		Scenario: "writer/balancer-out-of-range", Step: "Completion",
		Match: func(k, s string) bool {
			return slices.Equal(failedWithoutTopic(k), failedWithoutTopic(s))
		},
	},
	{
		ID:       "invalid-acks-at-construction",
		What:     "NewWriter returns an error for RequiredAcks other than RequireAll (-1), RequireOne (1) and RequireNone (0), naming the value.",
		Why:      "kafka-go's Writer sends the value, and every message of every call fails with kafka.InvalidRequiredAcks: a Writer that can never write is a configuration error, reported where the configuration is given.",
		Scenario: "writer/invalid-acks", Step: "acks=*",
		Match: func(k, s string) bool {
			return strings.Contains(k, "kafka.Error(21 ") && s == "new error"
		},
	},
	{
		ID:       "transport-kafka-go-only",
		What:     "NewWriter returns an error for a Transport that is not a *kafka.Transport (a RoundTripper of the program's own, a wrapper of kafka-go's), naming its type.",
		Why:      "The SDK's engine talks to the brokers itself: it takes the TLS, SASL, dial, client ID and timeouts from a *kafka.Transport's fields; the requests of a RoundTripper would pass by the client ID, the connection policy and the engine.",
		Scenario: "writer/custom-transport", Step: "NewWriter",
		Match: func(k, s string) bool {
			return k == "write nil" && s == "new error"
		},
	},
	{
		ID:       "invalid-compression-at-construction",
		What:     "NewWriter returns an error for a Compression kafka-go has no codec for (other than 0 to 4: none, Gzip, Snappy, Lz4, Zstd), naming the value.",
		Why:      "kafka-go's Writer marks its batches with the value and the broker refuses every message (kafka.CorruptMessage; under RequireNone they are dropped without an error): a Writer that can never write is a configuration error, reported where the configuration is given.",
		Scenario: "writer/invalid-compression", Step: "compression=*",
		Match: func(k, s string) bool {
			return strings.HasPrefix(k, "write error") && s == "new error"
		},
	},
	{
		ID:       "incompressible-batch-sent-uncompressed",
		What:     "With a Compression set, a batch the codec does not make smaller is sent uncompressed (marked so; readers see the same messages): a message within the broker's max.message.bytes uncompressed is stored even where compression would take it over the limit.",
		Why:      "kafka-go sends every batch compressed, so an incompressible message (already compressed or encrypted data) just under the limit grows past it and is refused with kafka.MessageSizeTooLarge; the engine keeps whichever of the two encodings is smaller.",
		Scenario: "writer/broker-message-limit", Step: "random: *",
		Match: func(k, s string) bool {
			refused := strings.Contains(k, "kafka.Error(10 ") && s == "nil (returns)"
			stored := k == "p0[]" && strings.HasPrefix(s, `p0[{key="k" value=1048500 bytes`)
			return refused || stored
		},
	},
	{
		ID:       "rides-through-outages",
		What:     "Once a broker has answered, the Writer resends through closed connections, refusals and leader elections until the delivery budget (110 s by default) or the call's ctx ends, and the Reader refetches until the call's ctx ends: MaxAttempts and WriteBackoffMin/Max do not apply, nor ReadBackoffMin/Max but to the waits for an offset past the log's end (MaxAttempts: 1 too: under RequireOne a message whose response was lost may be stored twice where kafka-go's call fails). A call whose ctx ended meanwhile leaves its messages queued: they are stored once the broker is back.",
		Why:      "kafka-go gives up after MaxAttempts attempts (seconds), so a broker's restart or an interzone close fails calls; a drop-in exists to ride those out. Before any broker answered, errors no retry fixes end a call at once and refusals or silence after DefaultBootstrapTimeout (10 s from the first dial; from the first failure when a broker had answered a request, such as the handshake, and then went silent), where kafka-go returns the first dial error.",
		Scenario: "*/broker-goes-away", Step: "*",
		Match: func(k, s string) bool {
			refused := strings.Contains(k, "ECONNREFUSED") && strings.Contains(s, "context.DeadlineExceeded") && strings.Contains(s, "(waits for ctx)")
			kept := strings.Contains(s, `"second"`) && !strings.Contains(k, `"second"`)
			return refused || kept
		},
	},
	{
		ID:       "commits-ride-through",
		What:     "CommitMessages, and ReadMessage's commit, go on through a coordinator that moved, is loading or is unreachable (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a closed connection) until the commit is made or the call's ctx ends; a commit refused for an ended generation returns once the group has settled, within RebalanceTimeout, and is made again only for the partitions the group gave this member back (see CommitMessages): the refusal otherwise.",
		Why:      "kafka-go tries three times within about 0.3 s and returns the error: a coordinator's failover, which takes seconds, fails the commit, and the program either stops or leaves its messages to be read again after the next rebalance. A commit it makes once its member has joined again is taken whoever owns the partition now, moving back the offset the new owner committed: its messages are read again.",
		Scenario: "reader/group/commit-coordinator-moves", Step: "CommitMessages while the coordinator moves",
		Match: func(k, s string) bool {
			return strings.Contains(k, "kafka.Error(16 ") && s == "nil (returns)"
		},
	},
	{
		ID:       "group-topics-missing-one",
		What:     "A group Reader whose GroupTopics names a topic the cluster lacks reads the topics it has, and the missing one once it is created.",
		Why:      "kafka-go's group leader fails its one metadata lookup for the missing topic and assigns no partition of any topic until the next rebalance: the Reader reads nothing, with no error to its caller.",
		Scenario: "reader/group/topics-missing-one", Step: "FetchMessage*",
		Match: func(k, s string) bool {
			return strings.Contains(k, "(waits for ctx)") || k == "none"
		},
	},
	{
		ID:       "group-refusals-returned",
		What:     "A refusal of the Reader's group that waiting does not fix (GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL) is returned by FetchMessage and ReadMessage at once, on each call while it lasts; the Reader joins once it ends.",
		Why:      "kafka-go's Reader retries the join behind its calls, which wait for their ctx with the cause only in its log: a group its credentials may not join looks like an idle topic.",
		Scenario: "reader/group/join-refused", Step: "FetchMessage",
		Match: func(k, s string) bool {
			return strings.Contains(k, "(waits for ctx)") && strings.Contains(s, "kafka.Error(30 ")
		},
	},
	{
		ID:       "balancer-runs-after-checks",
		What:     "A WriteMessages refused for its messages' topics (a message naming none, or a topic the cluster lacks) runs the Balancer for none of them: a stateful Balancer (RoundRobin, LeastBytes) places the next calls' messages as if the refused call had not been made.",
		Why:      "The Writer checks every message's size and topic before it places any, so that a refused call leaves nothing behind; kafka-go's has run the Balancer for the messages before the refused one, which moves a RoundRobin on.",
		Scenario: "writer/refused-call-and-balancer", Step: "stored",
		Match: func(k, s string) bool {
			kv, sv := storedValues.FindAllString(k, -1), storedValues.FindAllString(s, -1)
			slices.Sort(kv)
			slices.Sort(sv)
			return k != s && slices.Equal(kv, sv)
		},
	},
	{
		ID:       "batch-size-not-a-cap",
		What:     "BatchSize does not cap a synchronous call's batches: a call's messages to one partition go in one batch, so a message the broker refuses with its whole batch (a timestamp too far ahead) fails the call's other messages of that partition, and none of them is stored.",
		Why:      "kafka-go's BatchSize: 1 sends each message in a request of its own; the Writer sends a call in one request per broker, what makes synchronous calls fast, and cuts batches by BatchBytes only.",
		Scenario: "writer/batch-size-one", Step: "*",
		Match: func(k, s string) bool {
			refused := strings.Contains(k, "kafka.Error(32 ") && strings.Contains(s, "kafka.Error(32 ")
			return refused || (s == "p0[]" && strings.Contains(k, `value="a"`))
		},
	},
	{
		ID:       "sync-calls-skip-batch-timeout",
		What:     "A synchronous WriteMessages never waits for BatchTimeout, which paces async mode only: its messages are sent at once, or with those of concurrent calls while a request is in flight.",
		Why:      "kafka-go's call waits until its batch is full (BatchSize, BatchBytes) or BatchTimeout (1 s by default) has passed: a second per call for a service writing one message per request.",
		Scenario: "writer/batch-timeout", Step: "WriteMessages",
		Match: func(k, s string) bool {
			return strings.Contains(k, "context.DeadlineExceeded") && strings.Contains(k, "(waits for ctx)") && s == "nil (returns)"
		},
	},
	{
		ID:       "delivery-budget-timeout",
		What:     "A message no broker acknowledged within the Writer's delivery budget (10 × (WriteTimeout + 1 s), 110 s by default) fails with an error matching context.DeadlineExceeded and kgo.ErrRecordTimeout, and the error the engine last met when no broker answered since (a dial's *net.OpError, say).",
		Why:      "kafka-go's fails after MaxAttempts attempts of WriteTimeout with the last attempt's error, an i/o timeout (*net.OpError) or context.DeadlineExceeded: the Writer resends for longer (rides-through-outages), and its timeout is reported as kafka-go's own deadline errors are.",
		Scenario: "writer/broker-holds", Step: "WriteMessages while held",
		Match: func(k, s string) bool {
			timedOut := strings.Contains(k, "*net.OpError") || strings.Contains(k, "context.DeadlineExceeded")
			return timedOut && strings.Contains(s, "context.DeadlineExceeded") && strings.HasSuffix(s, "(returns)")
		},
	},
	{
		ID:       "completion-time-as-given",
		What:     "Completion gets each message's Time as the caller gave it, also on a topic whose broker stamps the append time (message.timestamp.type LogAppendTime): a message without a Time has the zero Time there.",
		Why:      "kafka-go sets Time from the produce response's append time; franz-go's engine does not pass that time on to the record it reports. The stored record has the broker's time, which a Reader returns.",
		Scenario: "writer/log-append-time", Step: "Completion",
		Match: func(k, s string) bool {
			return strings.Replace(k, "time=now", "time=zero", 1) == s
		},
	},
	{
		ID:       "stats-count-outcomes",
		What:     "Writer.Stats counts each message once, at its outcome, in Messages and Bytes, and in Errors, for each call, the partitions where its messages failed: a batch resent after a refusal is not counted again.",
		Why:      "kafka-go counts every attempt: a resent batch's messages twice and each failed attempt as an error; the engine resends batches without reporting each attempt's messages (SDKStats.Retries counts the resends it can).",
		Scenario: "writer/corrupt-in-transit", Step: "Stats after",
		Match: func(k, s string) bool {
			var km, sm int
			var ke, se bool
			_, kerr := fmt.Sscanf(k, "messages=%d errors>0=%t", &km, &ke)
			_, serr := fmt.Sscanf(s, "messages=%d errors>0=%t", &sm, &se)
			return kerr == nil && serr == nil && sm <= km && (!se || ke)
		},
	},
	{
		ID:       "writer-stats-fields",
		What:     "Writer.Stats' MaxAttempts, WriteBackoffMin and WriteBackoffMax report the retry policy, which applies in their place; Writes counts produce requests (a request carries a batch per partition); Bytes counts the messages' keys and values; Dials counts the Writer's connections; BatchTime and BatchQueueTime stay zero.",
		Why:      "The engine resends on the retry policy's backoff within the delivery budget (row rides-through-outages) and sends a request per broker, not per partition; kafka-go's count partition batches and their encoded bytes, and its Writer reports no dials (its Transport dials). The engine does not time batches.",
		Scenario: "writer/stats-fields", Step: "Stats settings|Stats counters",
		Match: func(k, s string) bool {
			if strings.HasPrefix(k, "MaxAttempts=") {
				return withoutRetrySettings(k) == withoutRetrySettings(s)
			}
			var kw, kb, kd, kt, sw, sb, sd, st int
			_, kerr := fmt.Sscanf(k, "Writes=%d Bytes=%d Dials=%d BatchTime=%d", &kw, &kb, &kd, &kt)
			_, serr := fmt.Sscanf(s, "Writes=%d Bytes=%d Dials=%d BatchTime=%d", &sw, &sb, &sd, &st)
			return kerr == nil && serr == nil && sw >= 1 && sw <= kw && sb > 0 && sb <= kb && st == 0
		},
	},
	{
		ID:       "reader-stats-handed-out",
		What:     "Reader.Stats' Messages, Bytes, Offset and Lag count what FetchMessage and ReadMessage handed out (after two FetchMessage calls on a partition of six messages: 2 messages, offset 2, lag 4).",
		Why:      "kafka-go's count what its fetches queued, ahead of the caller (6, 6 and 0 there): they tell an operator how far the Reader has fetched, not how far the program has read.",
		Scenario: "reader/partition/stats-counters", Step: "Stats counters",
		Match: func(k, s string) bool {
			var km, kb, ko, kl, sm, sb, so, sl int
			_, kerr := fmt.Sscanf(k, "Messages=%d Bytes=%d Offset=%d Lag=%d", &km, &kb, &ko, &kl)
			_, serr := fmt.Sscanf(s, "Messages=%d Bytes=%d Offset=%d Lag=%d", &sm, &sb, &so, &sl)
			return kerr == nil && serr == nil && sm == 2 && so == 2 && sl == 4 && sb > 0 && sm <= km && so <= ko && sl >= kl
		},
	},
	{
		ID:       "oore-past-end-recovers",
		What:     "With OffsetOutOfRangeError, a Reader whose offset is past the end of the partition's log (a partition Reader's SetOffset, a group's committed offset) returns kafka.OffsetOutOfRange from its fetches until the log reaches that offset (a poll that returned only that error is followed by a backoff, ReadBackoffMin doubling up to ReadBackoffMax, which in a group also holds back the other partitions' next messages by up to that backoff), then reads from it.",
		Why:      "kafka-go returns the error once and its reader of that partition then stops for good, fetching nothing until the next SetOffset or, in a group, until the Reader is made again, which the error does not tell the caller.",
		Scenario: "reader/group/committed-past-end|reader/partition/out-of-range-error", Step: "oore: FetchMessage*",
		Match: func(k, s string) bool {
			stalled := strings.Contains(k, "(waits for ctx)") || k == "none"
			reads := strings.Contains(s, "Offset Out Of Range") || strings.HasPrefix(s, "nil") ||
				strings.Contains(s, " offset=9 ") || strings.Contains(s, " offset=10 ") || strings.Contains(s, " offset=11 ")
			return stalled && reads
		},
	},
}

// withoutRetrySettings drops MaxAttempts, WriteBackoffMin and
// WriteBackoffMax from a Writer's "Stats settings" observation.
func withoutRetrySettings(settings string) string {
	return regexp.MustCompile(`(MaxAttempts|WriteBackoffMin|WriteBackoffMax)=\S+ `).ReplaceAllString(settings, "")
}

// withoutMarkers drops the transaction markers from a list of the keys
// of read messages (readUntil's): a marker's is version 0 and type 0
// (abort) or 1 (commit).
func withoutMarkers(read string) string {
	var kept []string
	for _, m := range strings.Split(read, ", ") {
		if m != `"\x00\x00\x00\x00"` && m != `"\x00\x00\x00\x01"` {
			kept = append(kept, m)
		}
	}
	return strings.Join(kept, ", ")
}

// placement is a Completion line's topic and partition.
var placement = regexp.MustCompile(`^topic=\S* partition=-?\d+ `)

// storedValues finds the values of a Stored observation.
var storedValues = regexp.MustCompile(`value=("(?:[^"\\]|\\.)*"|null|\d+ bytes "[^"]*"\.\.\.)`)

// failedTopic is the topic of a Completion line of a failed message.
var failedTopic = regexp.MustCompile(`^topic=\S* (.* err=error)$`)

// failedWithoutTopic is the lines of Completion's observation, those of
// failed messages without their topic, sorted.
func failedWithoutTopic(obs string) []string { return sortedLines(obs, failedTopic, "$1") }

// withoutPlacement is the lines of Completion's observation without their
// topic and partition, sorted.
func withoutPlacement(obs string) []string { return sortedLines(obs, placement, "") }

// sortedLines is the lines of obs, each with re's matches replaced by
// repl, sorted.
func sortedLines(obs string, re *regexp.Regexp, repl string) []string {
	lines := strings.Split(obs, "\n")
	for i, l := range lines {
		lines[i] = re.ReplaceAllString(l, repl)
	}
	slices.Sort(lines)
	return lines
}

// subsequence reports whether sub is in seq, in order.
func subsequence(sub, seq []string) bool {
	i := 0
	for _, x := range seq {
		if i < len(sub) && sub[i] == x {
			i++
		}
	}
	return i == len(sub)
}

// explain returns the ID of the first row that covers d, or "".
func explain(scenario string, d Diff, embedded bool) string {
	for _, row := range Differences {
		if row.Embedded && !embedded {
			continue
		}
		if !glob(row.Scenario, scenario) || !glob(row.Step, d.Step) {
			continue
		}
		if row.Match != nil && !row.Match(d.KafkaGo, d.SDK) {
			continue
		}
		return row.ID
	}
	return ""
}

// glob reports whether s matches pattern, where * stands for any text
// and | separates alternatives.
func glob(pattern, s string) bool {
	for _, alt := range strings.Split(pattern, "|") {
		parts := strings.Split(alt, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		if ok, _ := regexp.MatchString("^"+strings.Join(parts, ".*")+"$", s); ok {
			return true
		}
	}
	return false
}

// DocSection is the "Differences from kafka-go" section of the sdk
// package doc, as comment lines: one list item per row of Differences
// that is the SDK's (not the in-process broker's), wrapped.
func DocSection() string {
	var b strings.Builder
	b.WriteString("// # Differences from kafka-go\n//\n")
	for _, line := range wrap("The differential tests (internal/testkit/difftest) run the same scenarios through kafka-go's clients and this package's, in go test ./... on the in-process broker and in the conformance suite on Apache Kafka 4.3.1, and compare what every call returns (the errors.Is and errors.As targets), whether it returns on its own or waits for its ctx, what Completion and Stats report and what the cluster stores. They fail on any difference that is not one of these, each with its reason:", 74) {
		b.WriteString("// " + line + "\n")
	}
	b.WriteString("//\n")
	for _, row := range Differences {
		if row.Embedded {
			continue
		}
		for i, line := range wrap(row.What+" "+row.Why, 70) {
			if i == 0 {
				b.WriteString("//   - " + line + "\n")
			} else {
				b.WriteString("//     " + line + "\n")
			}
		}
	}
	return b.String()
}

// wrap splits text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

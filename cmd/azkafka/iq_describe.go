package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/azkafka/azkafka/internal/iqinspect"
	"github.com/azkafka/azkafka/iq"
)

// clusterFlags are the flags that build an iq.NewClusterSource.
type clusterFlags struct {
	bootstrap   string
	appID       string
	storeTopics map[string][]string
	sec         securityFlags
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bootstrap, "bootstrap", "", "")
	fs.StringVar(&c.appID, "application-id", "", "")
	c.sec.register(fs)
	fs.Func("store-topics", "", func(v string) error {
		store, topics, ok := strings.Cut(v, "=")
		if !ok || store == "" || topics == "" {
			return fmt.Errorf("%s: want STORE=TOPIC[,TOPIC...]", strconv.Quote(v))
		}
		if c.storeTopics == nil {
			c.storeTopics = map[string][]string{}
		}
		c.storeTopics[store] = strings.Split(topics, ",")
		return nil
	})
}

func (c *clusterFlags) source(timeout time.Duration, logger *slog.Logger) (*iq.Source, error) {
	if c.appID == "" {
		return nil, errors.New("--application-id is required with --bootstrap")
	}
	var brokers []string
	for _, b := range strings.Split(c.bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	opts := []iq.Option{iq.WithLookupEnv(iqLookupEnv), iq.WithPollTimeout(timeout), iq.WithLogger(logger)}
	base, err := c.sec.transport()
	if err != nil {
		return nil, err
	}
	if base != nil {
		opts = append(opts, iq.WithTransport(base))
	}
	for store, topics := range c.storeTopics {
		opts = append(opts, iq.WithStoreTopics(store, topics...))
	}
	return iq.NewClusterSource(brokers, c.appID, opts...)
}

type describeOutput struct {
	ApplicationID string                 `json:"application_id"`
	Protocol      string                 `json:"protocol"`
	State         string                 `json:"state"`
	Members       []memberOutput         `json:"members"`
	Stores        map[string]storeOutput `json:"stores"`
	Unmapped      map[string]string      `json:"unmapped"`
	Instances     []instanceOutput       `json:"instances"`
	TopicCounts   map[string]int         `json:"topics"`
}

type memberOutput struct {
	MemberID  string `json:"member_id"`
	ClientID  string `json:"client_id"`
	ProcessID string `json:"process_id"`
	Endpoint  string `json:"endpoint"`
	Rack      string `json:"rack"`
	AZ        string `json:"az"`
}

type storeOutput struct {
	Topics      []string `json:"topics"`
	Subtopology string   `json:"subtopology"`
}

type instanceOutput struct {
	Host    string                          `json:"host"`
	AZ      string                          `json:"az"`
	Active  map[string][]int                `json:"active"`
	Standby map[string][]int                `json:"standby"`
	Lags    map[string]map[string]lagOutput `json:"lags"`
}

func runIQDescribe(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("iq describe", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	var cf clusterFlags
	cf.register(flags)
	timeout := flags.Duration("timeout", 10*time.Second, "")
	asJSON := flags.Bool("json", false, "")
	rest, err := parseInterleaved(flags, args)
	if err == flag.ErrHelp {
		fmt.Fprint(stdout, iqUsage)
		return exitOK
	}
	usageErr := func(format string, a ...any) int {
		return failUsage(stderr, "iq describe", "iq", format, a...)
	}
	switch {
	case err != nil:
		return usageErr("%s", flagError(flags, err))
	case cf.bootstrap == "":
		return usageErr("--bootstrap is required")
	case len(rest) != 0:
		return usageErr("unexpected arguments %q", rest)
	case *timeout <= 0:
		return usageErr("--timeout %s: must be positive", *timeout)
	}
	src, err := cf.source(*timeout, slog.New(slog.DiscardHandler))
	if err != nil {
		return usageErr("%v", err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := src.Refresh(ctx); err != nil {
		fmt.Fprintf(stderr, "azkafka iq describe: %v\n", err)
		return exitFail
	}
	md, _ := src.Metadata()
	out := describe(iqinspect.GroupOf(src), md)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return exitOK
	}
	printDescribe(stdout, out)
	return exitOK
}

func describe(g *iqinspect.Group, md iq.Metadata) describeOutput {
	out := describeOutput{ApplicationID: g.ApplicationID, Protocol: g.Protocol, State: g.State,
		Stores: map[string]storeOutput{}, Unmapped: md.UnmappedStores, TopicCounts: md.TopicPartitions}
	if out.Unmapped == nil {
		out.Unmapped = map[string]string{}
	}
	for _, m := range g.Members {
		out.Members = append(out.Members, memberOutput{m.MemberID, m.ClientID, m.ProcessID, m.Endpoint, m.RackID, m.AZ})
	}
	for store, topics := range md.StoreSourceTopics {
		out.Stores[store] = storeOutput{Topics: topics, Subtopology: g.StoreSubtopology[store]}
	}
	for _, in := range md.Instances {
		io := instanceOutput{Host: in.HostInfo.String(), AZ: in.AZ,
			Active: storePartitions(md, in.ActivePartitions), Standby: storePartitions(md, in.StandbyPartitions),
			Lags: map[string]map[string]lagOutput{}}
		for store, ls := range in.Lags {
			m := map[string]lagOutput{}
			for p, l := range ls {
				m[strconv.Itoa(p)] = lagOutput{l.Current, l.End, l.Lag, l.Bound}
			}
			io.Lags[store] = m
		}
		out.Instances = append(out.Instances, io)
	}
	return out
}

// storePartitions maps each store to the partitions of tps that belong to
// its source topics.
func storePartitions(md iq.Metadata, tps []iq.TopicPartition) map[string][]int {
	out := map[string][]int{}
	for store, topics := range md.StoreSourceTopics {
		var ps []int
		for _, tp := range tps {
			if slices.Contains(topics, tp.Topic) && !slices.Contains(ps, tp.Partition) {
				ps = append(ps, tp.Partition)
			}
		}
		if len(ps) > 0 {
			sort.Ints(ps)
			out[store] = ps
		}
	}
	return out
}

func printDescribe(w io.Writer, o describeOutput) {
	fmt.Fprintf(w, "application %s: %s protocol, group %s, %d members, %d instances\n",
		o.ApplicationID, o.Protocol, o.State, len(o.Members), len(o.Instances))
	stores := make([]string, 0, len(o.Stores)+len(o.Unmapped))
	for s := range o.Stores {
		stores = append(stores, s)
	}
	for s := range o.Unmapped {
		stores = append(stores, s)
	}
	sort.Strings(stores)
	for _, s := range stores {
		if st, ok := o.Stores[s]; ok {
			var parts []string
			for _, t := range st.Topics {
				parts = append(parts, fmt.Sprintf("%s (%d)", t, o.TopicCounts[t]))
			}
			sub := ""
			if st.Subtopology != "" {
				sub = ", subtopology " + st.Subtopology
			}
			fmt.Fprintf(w, "store %s: source topics %s%s\n", s, strings.Join(parts, ", "), sub)
		} else {
			fmt.Fprintf(w, "store %s: not routable: %s\n", s, o.Unmapped[s])
		}
	}
	for _, in := range o.Instances {
		az := in.AZ
		if az == "" {
			az = "unknown"
		}
		fmt.Fprintf(w, "instance %s az %s\n", in.Host, az)
		for _, s := range stores {
			a, sb := in.Active[s], in.Standby[s]
			if len(a) == 0 && len(sb) == 0 {
				continue
			}
			var standbys []string
			for _, p := range sb {
				if l, ok := in.Lags[s][strconv.Itoa(p)]; ok {
					mark := ""
					if l.Bound {
						mark = "<="
					}
					standbys = append(standbys, fmt.Sprintf("%d (lag %s%d)", p, mark, l.Lag))
				} else {
					standbys = append(standbys, fmt.Sprintf("%d (lag unknown)", p))
				}
			}
			fmt.Fprintf(w, "  %s: active %v, standby [%s]\n", s, a, strings.Join(standbys, " "))
		}
	}
	for _, m := range o.Members {
		fmt.Fprintf(w, "member %s: client %s, process %s, endpoint %s, rack %q\n", m.MemberID, m.ClientID, m.ProcessID, m.Endpoint, m.Rack)
	}
}

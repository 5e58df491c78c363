package azprom_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	azprom "github.com/azkafka/azkafka/contrib/prometheus"
)

// families returns the label names of every family a Collector (with
// topic labels) describes, by name.
func families(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 100)
	go func() { azprom.New(azprom.WithTopicLabels()).Describe(ch); close(ch) }()
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range ch {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		out[m[1]] = strings.Split(m[2], ",")
	}
	return out
}

// TestDashboard: dashboard.json is a Grafana dashboard with the panels an
// on-call engineer wants first, and every series it queries, with every
// label it selects or groups by, is one the Collector exports.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	fams := families(t)
	series := regexp.MustCompile(`\b(azkafka_[a-z_]+)(\{[^}]*\})?`)
	selector := regexp.MustCompile(`([a-z_]+)\s*(=~|!=|!~|=)`)
	grouping := regexp.MustCompile(`by \(([^)]*)\)`)
	var titles []string
	for _, p := range dash.Panels {
		titles = append(titles, p.Title)
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			found := series.FindAllStringSubmatch(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: %q queries no azkafka series", p.Title, tg.Expr)
			}
			var used []string // labels of the expression's series
			for _, m := range found {
				name := m[1]
				labels, ok := fams[name]
				if !ok {
					base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
					if labels, ok = fams[base]; ok && strings.HasSuffix(name, "_bucket") {
						labels = append(slices.Clone(labels), "le")
					}
				}
				if !ok {
					t.Errorf("panel %q: %s is not a family the Collector exports", p.Title, name)
					continue
				}
				for _, s := range selector.FindAllStringSubmatch(m[2], -1) {
					if !slices.Contains(labels, s[1]) {
						t.Errorf("panel %q: %s has no label %s", p.Title, name, s[1])
					}
				}
				used = append(used, labels...)
			}
			for _, g := range grouping.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(g[1], ",") {
					if l = strings.TrimSpace(l); !slices.Contains(used, l) {
						t.Errorf("panel %q groups by %s, a label none of its series has", p.Title, l)
					}
				}
			}
		}
	}
	for _, want := range []string{"Messages written and read per second", "Messages failed for good", "Resends",
		"Share of bytes crossing zones", "Open connections", "Dials, re-dials and waits", "Consumer lag"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}

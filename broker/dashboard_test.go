package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard shipped in the repository.
const dashboardPath = "../deploy/grafana/ringbroker.json"

// grafanaDashboard is the part of Grafana's dashboard model the checks read.
type grafanaDashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// loadDashboard reads and decodes the dashboard; a field of the wrong type fails to decode.
func loadDashboard(t *testing.T) (*grafanaDashboard, []byte) {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not a dashboard: %v", dashboardPath, err)
	}
	return &d, raw
}

// panelTypes are Grafana's built-in panel types the dashboard may use.
var panelTypes = []string{"row", "timeseries", "stat", "gauge", "bargauge", "table", "text", "heatmap"}

// variableTypes are Grafana's template variable types.
var variableTypes = []string{"query", "datasource", "custom", "constant", "interval", "textbox", "adhoc"}

// TestDashboardStructure checks the dashboard as Grafana's import does and a little more: its
// identity and schema version, its variables, and every panel's type, grid position (inside
// the 24 columns, overlapping no other), data source and queries, whose variables must exist.
func TestDashboardStructure(t *testing.T) {
	d, _ := loadDashboard(t)
	if d.Title == "" || d.UID == "" || len(d.UID) > 40 {
		t.Errorf("title %q, uid %q: want both, the uid at most 40 characters", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d; want 36 or later (Grafana 9+ data source references)", d.SchemaVersion)
	}
	if d.Time.From == "" || d.Time.To == "" {
		t.Errorf("time range %q to %q; want both", d.Time.From, d.Time.To)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		if v.Name == "" || !slices.Contains(variableTypes, v.Type) || vars[v.Name] {
			t.Errorf("variable %q of type %q: want a unique name and one of %v", v.Name, v.Type, variableTypes)
		}
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Fatalf("no datasource variable")
	}
	var all []grafanaPanel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	if len(all) == 0 {
		t.Fatal("no panels")
	}
	ids := map[int]bool{}
	taken := map[[2]int]int{}
	varRef := regexp.MustCompile(`\$\{?(\w+)`)
	for _, p := range all {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 || ids[p.ID] {
			t.Errorf("%s: id not positive or not unique", where)
		}
		ids[p.ID] = true
		if !slices.Contains(panelTypes, p.Type) || p.Title == "" {
			t.Errorf("%s: type %q; want a title and one of %v", where, p.Type, panelTypes)
		}
		g := p.GridPos
		if g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v; want inside the 24 columns", where, g)
			continue
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[[2]int{x, y}]; ok {
					t.Errorf("%s overlaps panel %d at column %d, row %d", where, other, x, y)
				}
				taken[[2]int{x, y}] = p.ID
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: data source %+v; want prometheus ${datasource}", where, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", where)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.RefID == "" || refs[q.RefID] || strings.TrimSpace(q.Expr) == "" {
				t.Errorf("%s: query %q with refId %q; want an expression and a unique refId", where, q.Expr, q.RefID)
			}
			refs[q.RefID] = true
			for _, m := range varRef.FindAllStringSubmatch(q.Expr, -1) {
				if !vars[m[1]] && !strings.HasPrefix(m[1], "__") {
					t.Errorf("%s: query uses $%s, which is not a variable", where, m[1])
				}
			}
			if _, err := promqlMetricNames(q.Expr); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
}

// TestDashboardMetricsExported checks that every metric the dashboard's queries and
// variables read is on the /metrics page of a real broker that served produce, fetch and
// group traffic.
func TestDashboardMetricsExported(t *testing.T) {
	d, _ := loadDashboard(t)
	var exprs []string
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, q := range p.Targets {
				exprs = append(exprs, q.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for _, v := range d.Templating.List {
		var q struct {
			Query string `json:"query"`
		}
		if v.Type == "query" && json.Unmarshal(v.Query, &q) == nil {
			for _, m := range labelValues.FindAllStringSubmatch(q.Query, -1) {
				exprs = append(exprs, m[1])
			}
		}
	}
	want := map[string]bool{}
	for _, e := range exprs {
		names, err := promqlMetricNames(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			want[n] = true
		}
	}
	if len(want) < 20 {
		t.Fatalf("found only %d metric names in the dashboard: %v", len(want), want)
	}

	b := startBroker(t, "netpoll", t.TempDir(), "metrics.listen=127.0.0.1:0")
	runMetricsTraffic(t, b)
	have := scrapeMetrics(t, b).names()
	for n := range want {
		if !have[n] {
			t.Errorf("the dashboard reads %s, which the broker does not export", n)
		}
	}
}

// promqlLabelLists are the PromQL keywords followed by a list of label names in parentheses;
// the first two also follow an aggregation's name.
var promqlLabelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// promqlKeywords are the other PromQL words that are not metric names.
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}

// promqlMetricNames returns the metric names a PromQL expression selects: identifiers that
// are not functions, aggregations, keywords, label names or variables. It skips strings, label
// matchers, ranges and the label lists of by/without/on/ignoring/group_left/group_right.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	skipString := func(i int) (int, error) {
		for k := i + 1; k < len(expr); k++ {
			switch expr[k] {
			case '\\':
				k++
			case expr[i]:
				return k + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string in %q", expr)
	}
	skipTo := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'':
				end, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c in %q", open, expr)
	}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			j, err := skipTo(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipTo(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '"' || c == '\'':
			j, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$':
			i++
			for i < len(expr) && (expr[i] == '{' || expr[i] == '}' || isIdent(expr[i], false)) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case slices.Contains(promqlLabelLists, word) && k < len(expr) && expr[k] == '(':
				end, err := skipTo(k, '(', ')')
				if err != nil {
					return nil, err
				}
				j = end
			case k < len(expr) && expr[k] == '(':
				// a function or aggregation
			case slices.ContainsFunc(promqlLabelLists[:2], func(kw string) bool {
				return strings.HasPrefix(expr[k:], kw) && (k+len(kw) == len(expr) || !isIdent(expr[k+len(kw)], false))
			}):
				// an aggregation with its grouping first: sum by (x) (...)
			case slices.Contains(promqlKeywords, strings.ToLower(word)):
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

// TestPromQLMetricNames checks the extraction the dashboard tests rely on.
func TestPromQLMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (instance) (rate(a_total{topic="",x=~"$y"}[$__rate_interval]))`: {"a_total"},
		`max without(job) (b{quantile="0.99"}) / ignoring (q) c offset 5m`:      {"b", "c"},
		`rate(process_cpu_seconds_total{instance=~"$instance"}[5m]) * 100`:      {"process_cpu_seconds_total"},
		`d and on(x) e{l="}"}`:           {"d", "e"},
		`sum by(a) (bytes) + byte_count`: {"bytes", "byte_count"},
	} {
		got, err := promqlMetricNames(expr)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("promqlMetricNames(%q) = %v, %v; want %v", expr, got, err, want)
		}
	}
	if _, err := promqlMetricNames(`sum(rate(x{a="b"[5m]))`); err == nil {
		t.Errorf("an unbalanced expression was accepted")
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
)

// prometheusBin is Debian's prometheus (`make prometheus`).
func prometheusBin(t *testing.T) string {
	t.Helper()
	return testenv.Need(t, testenv.Prometheus, "Prometheus itself scrapes the services")
}

// TestPrometheusScrapesEveryService runs Prometheus itself against a suite whose four services
// serve metrics on ports the kernel chose (127.0.0.1:0, read from their logs): every target is
// up, and the tool-call counter has exactly the calls the test made through the admin API.
func TestPrometheusScrapesEveryService(t *testing.T) {
	bin := prometheusBin(t)
	peers := peersDir(t)
	extra := []string{"LEMONADE_ADMIN_API_KEY=" + adminKey, "ZEST_LOG_LEVEL=info"}
	for _, v := range metricsVars {
		extra = append(extra, v+"=127.0.0.1:0")
	}
	s := startSuite(t, extra...)

	targets := map[string]string{} // service → metrics address
	waitfor.NoError(t, 10*time.Second, func() error {
		for name := range metricsVars {
			m := metricsServing.FindStringSubmatch(s.Logs(name))
			if m == nil {
				return fmt.Errorf("%s has not logged its metrics address", name)
			}
			targets[name] = m[1]
		}
		return nil
	})

	// Prometheus on a loopback port, its storage in the test's temporary directory.
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-inference", "zest-toolhost"} {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", name, targets[name])
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// Prometheus takes no handed-over socket: a port is chosen, released and given to it (a
	// small window in which another process could take it; Prometheus then fails to start and
	// the test says so).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	cmd.Dir = dir
	prom := startProc(t, "prometheus", cmd, true)
	t.Cleanup(func() {
		if _, inTime := prom.stop(syscall.SIGTERM, 10*time.Second); !inTime {
			t.Errorf("prometheus did not stop within 10s of SIGTERM; killed")
		}
	})

	// Tool calls through the admin API on a registered stdio server: server-everything's echo.
	const calls = 3
	const id = "everything"
	if r := admin(t, s, "POST", "/servers", jsonBody(t, map[string]any{"id": id, "command": "node",
		"args": []string{filepath.Join(peers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")}})); r.Status != 200 {
		t.Fatalf("upsert: %d %s", r.Status, r.Body)
	}
	if r := admin(t, s, "POST", "/servers/"+id+"/connect", ""); r.Status != 200 {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	for i := range calls {
		r := admin(t, s, "POST", "/servers/"+id+"/tools/call", jsonBody(t, map[string]any{"name": "echo", "arguments": map[string]any{"message": fmt.Sprint("m", i)}}))
		if r.Status != 200 {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}

	query := func(q string) ([]promSample, error) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var body struct {
			Status string
			Error  string
			Data   struct{ Result []promSample }
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return nil, fmt.Errorf("query %s: %d: %w", q, resp.StatusCode, err)
		}
		if body.Status != "success" {
			return nil, fmt.Errorf("query %s: %s", q, body.Error)
		}
		return body.Data.Result, nil
	}
	// Every target up.
	waitfor.NoError(t, 30*time.Second, func() error {
		if !prom.running() {
			t.Fatalf("prometheus exited: %s", prom.logs.String())
		}
		res, err := query("up")
		if err != nil {
			return err
		}
		up := 0
		for _, r := range res {
			if r.value() == 1 {
				up++
			}
		}
		if up != 4 || len(res) != 4 {
			return fmt.Errorf("up: %d of %d targets, want 4 of 4: %v", up, len(res), res)
		}
		return nil
	})
	// The counter the test drove, as Prometheus scraped it.
	counter := fmt.Sprintf(`zest_tool_calls_total{job="zest-mcpgateway",path="admin",server=%q,tool="echo",outcome="ok"}`, id)
	waitfor.NoError(t, 15*time.Second, func() error {
		res, err := query(counter)
		if err != nil {
			return err
		}
		if len(res) != 1 || res[0].value() != calls {
			return fmt.Errorf("%s = %v, want %d", counter, res, calls)
		}
		return nil
	})
	// The other services saw the same calls: the RPCs, the child, the routes.
	for _, q := range []string{
		`grpc_server_handled_total{job="zest-mcpgateway",grpc_service="zest.mcpgateway.v1.AdminService",grpc_method="CallTool",grpc_code="OK"}`,
		`zest_http_requests_total{job="zest-gateway",method="POST",route="/internal/mcp/servers/{id}/tools/call",code="200"}`,
	} {
		waitfor.NoError(t, 15*time.Second, func() error {
			res, err := query(q)
			if err != nil {
				return err
			}
			if len(res) != 1 || res[0].value() != calls {
				return fmt.Errorf("%s = %v, want %d", q, res, calls)
			}
			return nil
		})
	}
	waitfor.NoError(t, 15*time.Second, func() error {
		res, err := query(`zest_toolhost_children{job="zest-toolhost"}`)
		if err != nil {
			return err
		}
		if len(res) != 1 || res[0].value() != 1 {
			return fmt.Errorf("children = %v, want 1", res)
		}
		return nil
	})
	for _, q := range []string{`go_goroutines`, `process_resident_memory_bytes`} {
		if res, err := query(q); err != nil || len(res) != 4 {
			t.Errorf("%s: %d series, %v; want one per service", q, len(res), err)
		}
	}
	checkDashboardAndDocs(t, query)
}

var metricName = regexp.MustCompile(`\b(?:zest|grpc)_[a-z_]+`)

// checkDashboardAndDocs holds deploy/grafana/zest.json and docs/operator/metrics.md's table to
// what the services serve: every dashboard query is valid PromQL to this Prometheus, every
// metric it names is in the table, and every zest_ metric Prometheus scraped is in the table.
// (docs/reference_test.go holds the same table to the metrics the services register.)
func checkDashboardAndDocs(t *testing.T, query func(string) ([]promSample, error)) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "operator", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	if i := strings.Index(section, "\n## Every metric\n"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[1:], "\n## "); j >= 0 {
			section = section[:j+1]
		}
	} else {
		t.Fatal(`docs/operator/metrics.md has no "## Every metric" section`)
	}
	documented := func(name string) bool {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && strings.Contains(section, "`"+base+"`") {
				return true
			}
		}
		return strings.Contains(section, "`"+name+"`")
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "grafana", "zest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/zest.json: %v", err)
	}
	exprs := 0
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$__range", "5m", "$job", "zest-.*")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			if _, err := query(grafana.Replace(tg.Expr)); err != nil {
				t.Errorf("dashboard panel %q: %v", p.Title, err)
			}
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				if !documented(name) {
					t.Errorf("dashboard panel %q uses %s, which docs/operator/metrics.md's table does not list", p.Title, name)
				}
			}
		}
	}
	if exprs < 20 {
		t.Errorf("the dashboard has %d queries", exprs)
	}
	names, err := query(`count by (__name__) ({__name__=~"zest_.+"})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 {
		t.Errorf("Prometheus has %d zest_ metrics: %v", len(names), names)
	}
	for _, n := range names {
		if name := n.Metric["__name__"]; !documented(name) {
			t.Errorf("%s is served but not in docs/operator/metrics.md's table", name)
		}
	}
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string
	Value  [2]any // [unix time, "value"]
}

func (p promSample) value() float64 {
	s, _ := p.Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return -1
	}
	return v
}

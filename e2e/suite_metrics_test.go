package e2e

// The services' Prometheus metrics as tests read them.

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// edgeGauge reads one unlabelled gauge of the edge's metrics (its suite started with
// ZEST_EDGE_METRICS_ADDR=127.0.0.1:0 and ZEST_LOG_LEVEL=info, so that the address is logged).
func edgeGauge(t *testing.T, s *Suite, name string) (float64, error) {
	t.Helper()
	return gauge(s.Logs("zest-gateway"), name)
}

// gauge reads one unlabelled gauge of the metrics of the service whose logs these are (started
// with its *_METRICS_ADDR=127.0.0.1:0 and ZEST_LOG_LEVEL=info, so that the address is logged).
func gauge(logs, name string) (float64, error) {
	m := metricsServing.FindStringSubmatch(logs)
	if m == nil {
		return 0, fmt.Errorf("the service has not logged its metrics address")
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in the metrics at %s", name, m[1])
}

// metricsVars names the variable each service binary serves its metrics on.
var metricsVars = map[string]string{
	"zest-gateway": "ZEST_EDGE_METRICS_ADDR", "zest-mcpgateway": "ZEST_MCPGATEWAY_METRICS_ADDR",
	"zest-inference": "ZEST_INFERENCE_METRICS_ADDR", "zest-toolhost": "ZEST_TOOLHOST_METRICS_ADDR",
}

// metricsOff turns the metrics servers off in every service the tests start unless a test
// says otherwise: their default ports are fixed (13319–13322), and suites run side by side.
func metricsOff() {
	for _, v := range metricsVars {
		if _, set := os.LookupEnv(v); !set {
			os.Setenv(v, "off")
		}
	}
}

var metricsServing = regexp.MustCompile(`msg="metrics serving"[^\n]* addr=(127\.0\.0\.1:\d+)`)

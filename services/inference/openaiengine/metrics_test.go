package openaiengine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/zestmcp/zest/lib/waitfor"
)

// TestReplicaUpMetric: while the engine runs, each replica of the model file has an up gauge
// from its last probe (1 reachable, 0 not), labelled without the URL's user information; when
// Run returns, the engine is no longer reported.
func TestReplicaUpMetric(t *testing.T) {
	good := fakeEngine(t, nil)
	dead := deadURL(t)
	withUser := strings.Replace(good.URL, "http://", "http://user:secret@", 1) + "/v1"
	e := engine(t, "up", withUser, dead)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	want := `
# HELP zest_inference_replica_up 1 when the engine replica answered its last health probe, else 0.
# TYPE zest_inference_replica_up gauge
zest_inference_replica_up{model="m",replica="` + dead + `"} 0
zest_inference_replica_up{model="m",replica="` + good.URL + `/v1"} 1
`
	waitfor.NoError(t, 5*time.Second, func() error {
		return testutil.CollectAndCompare(replicaCollector{}, strings.NewReader(want), "zest_inference_replica_up")
	})
	cancel()
	<-done
	if n := testutil.CollectAndCount(replicaCollector{}, "zest_inference_replica_up"); n != 0 {
		t.Fatalf("%d series after Run returned", n)
	}
}

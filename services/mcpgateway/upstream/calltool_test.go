package upstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/zestmcp/zest/lib/mcptest"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		result string
		want   string
	}{
		{`{"content":[]}`, OutcomeOK},
		{`{"content":[],"isError":false}`, OutcomeOK},
		{`{"content":[{"type":"text","text":"\"isError\":true"}]}`, OutcomeOK},
		{`{"content":[],"isError":true}`, OutcomeIsError},
		{`{"content":[{"type":"text","text":"input_required"}],"isError":true}`, OutcomeIsError},
		{`{"resultType":"input_required","inputRequests":{}}`, OutcomeInputRequired},
	} {
		if got := Outcome([]byte(c.result), nil); got != c.want {
			t.Errorf("Outcome(%s) = %s, want %s", c.result, got, c.want)
		}
	}
	if got := Outcome(nil, fmt.Errorf("wrapped: %w", &InputRequiredError{Call: "t:1"})); got != OutcomeInputRequired {
		t.Errorf("Outcome(InputRequiredError) = %s", got)
	}
}

// A call whose caller gave up fails with context.Canceled in its chain (not a timeout, not a
// bare upstream failure), whose outcome is canceled, on both transports.
func TestCancelledCallIsCanceled(t *testing.T) {
	f, th := newFakeHost(t)
	f.setTools("fx", tools("slow"))
	u := mcptest.Start(t, mcptest.Options{})
	m := New(th, nil, nil)
	t.Cleanup(func() { m.Close(context.Background()) })
	for _, c := range []struct {
		cfg  *mcpgatewayv1.ServerConfig
		tool string
	}{{stdioConfig("fx"), "slow"}, {httpConfig("hx", u.URL), "echo"}} {
		t.Run(c.cfg.GetTransport(), func(t *testing.T) {
			if err := m.Connect(t.Context(), c.cfg); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := m.DispatchToolCall(ctx, c.cfg, []byte(`{"name":"`+c.tool+`","arguments":{}}`), 0, Hooks{})
			if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a cancelled call: %v, want context.Canceled in its chain", err)
			}
			if got := Outcome(nil, err); got != OutcomeCanceled {
				t.Fatalf("outcome %v, want %s", got, OutcomeCanceled)
			}
		})
	}
}

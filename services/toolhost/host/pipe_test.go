package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/toolhostpipe"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestPipeMultiplexesCallsProgressAndCancel(t *testing.T) {
	c := startHost(t)
	if _, err := c.EnsureStarted(t.Context(), &toolhostv1.EnsureStartedRequest{Spec: serverSpec(t, "everything", "everything")}); err != nil {
		t.Fatal(err)
	}
	pipe := toolhostpipe.New(c)
	t.Cleanup(pipe.Close)

	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				want := fmt.Sprintf("p%d-%d", g, i)
				p, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"message": want}})
				r, err := pipe.Call(t.Context(), &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: p}, nil)
				if err != nil || !strings.Contains(string(r.GetResult()), `"Echo: `+want+`"`) {
					t.Errorf("%s: %v %v", want, r, err)
				}
			}
		}()
	}
	wg.Wait()

	var notes []string
	p := []byte(`{"name":"trigger-long-running-operation","arguments":{"duration":0.3,"steps":3},"_meta":{"progressToken":7}}`)
	r, err := pipe.Call(t.Context(), &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: p},
		func(n []byte) { notes = append(notes, string(n)) })
	if err != nil || r.GetResult() == nil || len(notes) != 3 || !strings.Contains(notes[0], `"progressToken":7`) {
		t.Fatalf("progress over the pipe: %v %v %v", r, err, notes)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	p = []byte(`{"name":"trigger-long-running-operation","arguments":{"duration":10,"steps":2}}`)
	_, err = pipe.Call(ctx, &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: p}, nil)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("timed-out call: %v", err)
	}
	if _, err := pipe.Call(t.Context(), &toolhostv1.CallRequest{Id: "nobody", Method: "tools/call", Params: []byte(`{}`)}, nil); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown server over the pipe: %v", err)
	}
}

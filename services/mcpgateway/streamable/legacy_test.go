package streamable

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zestmcp/zest/lib/waitfor"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/mcphttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// legacyFake answers initialize with session "sid-1" and echoes every other request's id in
// a result naming the session it came in; Listen of sid-1 sends one notification when told.
func legacyFake(notify <-chan struct{}, ended chan<- string) *fakeMCP {
	return &fakeMCP{
		exchange: func(req *mcphttp.Request, s mcphttp.ExchangeStream) error {
			body := string(req.Body)
			if strings.Contains(body, `"initialize"`) {
				if req.SessionID() != "" {
					return status.Error(codes.InvalidArgument, "initialize in a session")
				}
				if err := s.Session("sid-1", ""); err != nil {
					return err
				}
				return sendFinal(s, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05"}}`)
			}
			if req.SessionID() != "sid-1" {
				return status.Error(codes.NotFound, "session not found")
			}
			if !strings.Contains(body, `"id"`) {
				return nil // a notification: no answer
			}
			if err := sendMessage(s, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`); err != nil {
				return err
			}
			return sendFinal(s, `{"jsonrpc":"2.0","id":2,"result":{"server":"`+req.ServerID+`"}}`)
		},
		listen: func(req *mcphttp.Request, s mcphttp.ListenStream) error {
			if req.SessionID() != "sid-1" {
				return status.Error(codes.NotFound, "session not found")
			}
			if err := s.Open(); err != nil {
				return err
			}
			select {
			case <-notify:
			case <-s.Context().Done():
				return nil
			}
			if err := s.Message([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)); err != nil {
				return err
			}
			<-s.Context().Done()
			return nil
		},
		end: func(_ context.Context, req *mcphttp.Request) error {
			ended <- req.SessionID() + " " + req.ServerID
			return nil
		},
	}
}

// sseEvent is one event of an SSE stream.
type sseEvent struct{ name, data string }

// openLegacy opens GET url (a legacy /sse) with key and returns its events as they come.
func openLegacy(t *testing.T, ctx context.Context, url, key string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req := must(http.NewRequestWithContext(ctx, "GET", url, nil))
	req.Header.Set("Accept", "text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan sseEvent, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "event: "):
				ev.name = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				ev.data = strings.TrimPrefix(l, "data: ")
			case l == "" && ev.name != "":
				events <- ev
				ev = sseEvent{}
			}
		}
	}()
	return events, resp
}

func nextEvent(t *testing.T, events <-chan sseEvent, what string) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("the stream ended before %s", what)
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
	}
	return sseEvent{}
}

// postLegacy POSTs body to a stream's message URL with key; an answer that does not come
// within 10 s fails the test.
func postLegacy(t *testing.T, url, key, body string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := must(http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(t, req)
}

// TestLegacyFraming: GET <endpoint>/sse sends the endpoint event first (the message URL of
// this endpoint, with the stream's id); each POST there is 202 and its answers, and the
// session's own messages, arrive as message events; the stream's end ends its session.
func TestLegacyFraming(t *testing.T) {
	for _, endpoint := range []string{"/mcp", "/mcp/servers/s1", "/mcp/presets/p1"} {
		t.Run(endpoint, func(t *testing.T) {
			notify, ended := make(chan struct{}), make(chan string, 1)
			f := legacyFake(notify, ended)
			var asked []string
			var mu sync.Mutex
			srv := serveWith(t, f, time.Hour, func(_ http.ResponseWriter, _ *http.Request, a *mcpgatewayv1.Admit) (func(), bool) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, fmt.Sprintf("weight=%d held=%v", a.GetWeight(), a.GetHeldOpen()))
				return func() {}, true
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			events, resp := openLegacy(t, ctx, srv.URL+endpoint+"/sse", "k1")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("GET /sse: %d %v", resp.StatusCode, resp.Header)
			}
			ev := nextEvent(t, events, "the endpoint event")
			if ev.name != "endpoint" || !strings.HasPrefix(ev.data, endpoint+"/message?sessionId=") || len(ev.data) < len(endpoint)+len("/message?sessionId=")+16 {
				t.Fatalf("first event %+v", ev)
			}
			msgURL := srv.URL + ev.data
			if a := postLegacy(t, msgURL, "k1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`); a.status != http.StatusAccepted {
				t.Fatalf("POST initialize: %+v", a)
			}
			if ev := nextEvent(t, events, "initialize's answer"); ev.name != "message" || ev.data != `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05"}}` {
				t.Fatalf("initialize's answer: %+v", ev)
			}
			if a := postLegacy(t, msgURL, "k1", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
				t.Fatalf("POST a notification: %+v", a)
			}
			if a := postLegacy(t, msgURL, "k1", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); a.status != http.StatusAccepted || a.body != "" {
				t.Fatalf("POST tools/list: %+v", a)
			}
			if ev := nextEvent(t, events, "the progress"); ev.data != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}` {
				t.Fatalf("the notification before the answer: %+v", ev)
			}
			wantServer := strings.TrimPrefix(endpoint, "/mcp/servers/")
			if !strings.HasPrefix(endpoint, "/mcp/servers/") {
				wantServer = ""
			}
			if ev := nextEvent(t, events, "tools/list's answer"); ev.data != `{"jsonrpc":"2.0","id":2,"result":{"server":"`+wantServer+`"}}` {
				t.Fatalf("tools/list's answer: %+v", ev)
			}
			close(notify)
			if ev := nextEvent(t, events, "the session's own message"); ev.data != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
				t.Fatalf("the session's own message: %+v", ev)
			}
			mu.Lock()
			if strings.Join(asked, ";") != "weight=0 held=true" {
				t.Errorf("admissions asked: %q, want the stream held as one and nothing else", asked)
			}
			mu.Unlock()
			cancel()
			select {
			case got := <-ended:
				if got != "sid-1 "+wantServer {
					t.Fatalf("EndSession(%q)", got)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the stream's end did not end its session")
			}
			// The stream is gone: its URL is 404 from then on.
			if a := postLegacy(t, msgURL, "k1", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); a.status != 404 {
				t.Fatalf("POST after the stream ended: %+v", a)
			}
		})
	}
}

// TestLegacyPostRefusals: a POST to an unknown stream, another caller's, another endpoint's,
// or without the stream's id is refused before any work, with a JSON-RPC error naming the fix.
func TestLegacyPostRefusals(t *testing.T) {
	f := legacyFake(make(chan struct{}), make(chan string, 1))
	srv := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := openLegacy(t, ctx, srv.URL+"/mcp/servers/s1/sse", "owner")
	ev := nextEvent(t, events, "the endpoint event")
	id := strings.TrimPrefix(ev.data, "/mcp/servers/s1/message?sessionId=")
	ping := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	for _, c := range []struct {
		name, url, key string
		status         int
		says           string
	}{
		{"unknown stream", "/mcp/servers/s1/message?sessionId=nope", "owner", 404, "open GET /mcp/servers/s1/sse again"},
		{"another caller's stream", "/mcp/servers/s1/message?sessionId=" + id, "intruder", 404, "no HTTP+SSE stream"},
		{"another endpoint's stream", "/mcp/servers/s2/message?sessionId=" + id, "owner", 404, "open GET /mcp/servers/s2/sse again"},
		{"another kind of endpoint", "/mcp/message?sessionId=" + id, "owner", 404, "no HTTP+SSE stream"},
		{"no stream id", "/mcp/servers/s1/message", "owner", 400, "sessionId query parameter is missing"},
	} {
		a := postLegacy(t, srv.URL+c.url, c.key, ping)
		code, msg := rpcError(t, a)
		if a.status != c.status || code != -32600 || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %d %q", c.name, a.status, code, msg)
		}
	}
	if n := f.exchangeCount(); n != 0 {
		t.Fatalf("%d refused POSTs reached the endpoint", n)
	}
	// The owner's POST still works, and the refusals sent nothing on its stream.
	if a := postLegacy(t, srv.URL+ev.data, "owner", ping); a.status != 202 {
		t.Fatalf("the owner's POST: %+v", a)
	}
	if ev := nextEvent(t, events, "initialize's answer"); !strings.Contains(ev.data, `"id":1,"result"`) {
		t.Fatalf("first message after the refusals: %+v", ev)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/mcp/sse"}, {"GET", "/mcp/message"}} {
		a := do(t, must(http.NewRequestWithContext(t.Context(), c.method, srv.URL+c.path, nil)))
		if _, msg := rpcError(t, a); a.status != 405 || !strings.Contains(msg, "2024-11-05") {
			t.Errorf("%s %s: %d %q", c.method, c.path, a.status, msg)
		}
	}
	if a := do(t, must(http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/mcp/nothing/here", nil))); a.status != 404 {
		t.Errorf("an unknown path: %+v", a)
	} else if _, msg := rpcError(t, a); !strings.Contains(msg, "No route for GET /mcp/nothing/here") {
		t.Errorf("an unknown path: %q", msg)
	}
}

// stalledWriter is the ResponseWriter of a client that reads the endpoint event and then
// nothing: every later Write blocks until released.
type stalledWriter struct {
	header   http.Header
	endpoint chan string
	release  chan struct{}
	writes   int
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		w.endpoint <- string(p)
		return len(p), nil
	}
	<-w.release
	return 0, context.Canceled
}

// TestLegacyStreamBudget: a client that lets MaxLegacyPending messages wait unread loses its
// stream: its POSTs are 404 from then on, though the stream's writer is still stuck.
func TestLegacyStreamBudget(t *testing.T) {
	f := &fakeMCP{exchange: func(req *mcphttp.Request, s mcphttp.ExchangeStream) error {
		if !strings.Contains(string(req.Body), "tools/list") {
			return nil
		}
		for i := range MaxLegacyPending + 2 {
			if err := sendMessage(s, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":%d}}`, i)); err != nil {
				return err
			}
		}
		return sendFinal(s, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}}
	mux := Mux(&Handler{MCP: f, KeepAlive: time.Hour})
	w := &stalledWriter{header: http.Header{}, endpoint: make(chan string, 1), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mux.ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), "GET", "/mcp/sse", nil))
	}()
	var ep string
	select {
	case ep = <-w.endpoint:
	case <-time.After(5 * time.Second):
		t.Fatal("no endpoint event")
	}
	url := strings.TrimSuffix(strings.TrimPrefix(ep, "event: endpoint\ndata: "), "\n\n")
	postTo := func(body string) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body)))
		return rec.Code
	}
	if code := postTo(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	waitfor.True(t, 5*time.Second, "the stream past its budget to be closed", func() bool {
		return postTo(`{"jsonrpc":"2.0","method":"notifications/initialized"}`) == http.StatusNotFound
	})
	close(w.release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
}

// TestLegacyPostAcceptedBeforeItsWork: a POST is 202 before its work ends, so that a client
// that POSTs one message at a time (the Python SDK's sse_client) can answer a request the
// call relays to it while the call waits; the call's answer then comes on the stream.
func TestLegacyPostAcceptedBeforeItsWork(t *testing.T) {
	answered := make(chan struct{})
	f := legacyFake(make(chan struct{}), make(chan string, 1))
	inner := f.exchange
	f.exchange = func(req *mcphttp.Request, s mcphttp.ExchangeStream) error {
		switch body := string(req.Body); {
		case strings.Contains(body, `"tools/call"`):
			if err := sendMessage(s, `{"jsonrpc":"2.0","id":"zr.1","method":"sampling/createMessage","params":{}}`); err != nil {
				return err
			}
			select { // the call waits for the client's answer to its relayed request
			case <-answered:
			case <-s.Context().Done():
				return s.Context().Err()
			}
			return sendFinal(s, `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`)
		case strings.Contains(body, `"zr.1"`):
			close(answered)
			return nil
		}
		return inner(req, s)
	}
	srv := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := openLegacy(t, ctx, srv.URL+"/mcp/sse", "k")
	msgURL := srv.URL + nextEvent(t, events, "the endpoint event").data
	if a := postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`); a.status != 202 {
		t.Fatalf("initialize: %+v", a)
	}
	nextEvent(t, events, "initialize's answer")
	// One message at a time, each POST awaited before the next, as a sequential client does.
	if a := postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`); a.status != 202 {
		t.Fatalf("tools/call: %+v", a)
	}
	if ev := nextEvent(t, events, "the relayed request"); !strings.Contains(ev.data, `"sampling/createMessage"`) {
		t.Fatalf("relayed request: %+v", ev)
	}
	if a := postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","id":"zr.1","result":{"role":"assistant"}}`); a.status != 202 {
		t.Fatalf("the relayed request's answer: %+v", a)
	}
	if ev := nextEvent(t, events, "the call's answer"); ev.data != `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}` {
		t.Fatalf("the call's answer: %+v", ev)
	}
}

// TestLegacyErrorsOnTheStream: an error before any answer (a session that expired) reaches
// the client as the request's JSON-RPC error on the stream, with its id; a notification's
// error has no answer.
func TestLegacyErrorsOnTheStream(t *testing.T) {
	f := &fakeMCP{exchange: func(*mcphttp.Request, mcphttp.ExchangeStream) error {
		return status.Error(codes.NotFound, "session not found: initialize again")
	}}
	srv := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := openLegacy(t, ctx, srv.URL+"/mcp/sse", "k")
	msgURL := srv.URL + nextEvent(t, events, "the endpoint event").data
	if a := postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != 202 {
		t.Fatalf("a notification: %+v", a)
	}
	if a := postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); a.status != 202 {
		t.Fatalf("tools/list: %+v", a)
	}
	if ev := nextEvent(t, events, "the error"); ev.data != `{"error":{"code":-32600,"message":"session not found: initialize again"},"id":7,"jsonrpc":"2.0"}` {
		t.Fatalf("the error on the stream: %+v", ev)
	}
}

// TestLegacyInFlightBound: at most MaxLegacyInFlight POSTed messages of one stream run at
// once; the next POST is 429 naming the bound, and a slot freed takes POSTs again.
func TestLegacyInFlightBound(t *testing.T) {
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(MaxLegacyInFlight)
	f := &fakeMCP{exchange: func(_ *mcphttp.Request, s mcphttp.ExchangeStream) error {
		running.Done()
		select {
		case <-release:
		case <-s.Context().Done():
		}
		return nil
	}}
	srv := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := openLegacy(t, ctx, srv.URL+"/mcp/sse", "k")
	msgURL := srv.URL + nextEvent(t, events, "the endpoint event").data
	for i := range MaxLegacyInFlight {
		if a := postLegacy(t, msgURL, "k", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i)); a.status != 202 {
			t.Fatalf("POST %d: %+v", i, a)
		}
	}
	running.Wait()
	a := postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)
	if a.status != 429 || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, fmt.Sprintf("%d messages of this HTTP+SSE stream are in flight (streamable.MaxLegacyInFlight)", MaxLegacyInFlight)) {
		t.Fatalf("POST past the bound: %+v", a)
	}
	running.Add(1) // the next POST's work
	close(release)
	waitfor.True(t, 5*time.Second, "a POST to be taken once slots are free", func() bool {
		return postLegacy(t, msgURL, "k", `{"jsonrpc":"2.0","method":"notifications/initialized"}`).status == 202
	})
}

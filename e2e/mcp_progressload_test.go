package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// progressCall is one client's tools/call of trigger-long-running-operation and what its
// POST's SSE stream brought back.
type progressCall struct {
	session string
	id      string // the JSON-RPC id (unique per client, so a result sent to the wrong client shows)
	token   any    // the client's progressToken: nil for none; equal values across clients on purpose
	steps   int
	msgs    []map[string]any
	err     error
}

// body is the tools/call request of the call.
func (c *progressCall) body() string {
	meta := ""
	if c.token != nil {
		tok, _ := json.Marshal(c.token)
		meta = fmt.Sprintf(`,"_meta":{"progressToken":%s}`, tok)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":%g,"steps":%d}%s}}`,
		c.id, 0.05*float64(c.steps), c.steps, meta)
}

// post sends the call and reads its answer (an SSE stream, or JSON), handing each message to seen as it comes
// (when seen is not nil). It uses no testing.T: it runs on goroutines of its own.
func (c *progressCall) post(ctx context.Context, url string, seen chan<- map[string]any) {
	if seen != nil {
		defer close(seen)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(c.body()))
	if err != nil {
		c.err = err
		return
	}
	for _, h := range append(mcpHeaders, "Mcp-Session-Id: "+c.session, fedAPIAuth, "MCP-Protocol-Version: 2025-11-25") {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.err = fmt.Errorf("HTTP %d", resp.StatusCode)
		return
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") { // a call without progress may be answered as JSON
		var m map[string]any
		c.err = json.NewDecoder(resp.Body).Decode(&m)
		c.msgs = append(c.msgs, m)
		if seen != nil {
			seen <- m
		}
		return
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			c.err = fmt.Errorf("SSE data %q: %w", data, err)
			return
		}
		c.msgs = append(c.msgs, m)
		if seen != nil {
			seen <- m
		}
	}
	c.err = sc.Err()
}

// check says what is wrong with the messages the call got: exactly its own progress
// notifications (its token, progress 1…steps of total steps, in order), then its result.
func (c *progressCall) check() error {
	if c.err != nil {
		return c.err
	}
	want := 0
	if c.token != nil {
		want = c.steps
	}
	if len(c.msgs) != want+1 {
		return fmt.Errorf("%d messages, want %d progress notifications and the result: %v", len(c.msgs), want, c.msgs)
	}
	for i, m := range c.msgs[:want] {
		p, _ := m["params"].(map[string]any)
		if m["method"] != "notifications/progress" || p["progressToken"] != c.token || p["progress"] != float64(i+1) || p["total"] != float64(c.steps) {
			return fmt.Errorf("message %d is %v, want progress %d of %d with token %v", i, m, i+1, c.steps, c.token)
		}
	}
	last := c.msgs[want]
	res, _ := last["result"].(map[string]any)
	content, _ := res["content"].([]any)
	text := ""
	if len(content) == 1 {
		text, _ = content[0].(map[string]any)["text"].(string)
	}
	if last["id"] != c.id || res["isError"] == true || !strings.Contains(text, fmt.Sprintf("Steps: %d.", c.steps)) {
		return fmt.Errorf("last message %v, want the result of %s (%d steps)", last, c.id, c.steps)
	}
	return nil
}

// TestProgressUnderLoad: one client's call of server-everything (stdio, one child shared by
// every caller through the tool host) gets exactly its own progress notifications, with its
// own token, in order and before its result, while 20 other clients (each a session of its
// own) call the same child at the same time, most of them with progress tokens of their own,
// the same values as the first client's among them (the tool host gives each call a token of
// its own upstream and gives each client its own back). Every call's result reaches its client.
func TestProgressUnderLoad(t *testing.T) {
	s := startSuite(t, "LEMONADE_API_KEY="+fedAPIKey, "LEMONADE_ADMIN_API_KEY="+adminKey)
	registerServer(t, s, map[string]any{"id": "everything", "command": "node", "args": []string{serverEverything(t)}})
	url := fedURL(s, "everything")

	// The first client's call runs longest (40 steps of 50 ms): the others run inside it.
	first := &progressCall{session: mustInit(t, s, "everything"), id: "first", token: "shared-token", steps: 40}
	others := make([]*progressCall, 20)
	for i := range others {
		c := &progressCall{session: mustInit(t, s, "everything"), id: fmt.Sprintf("other-%d", i), steps: 2 + i%5}
		switch i % 4 {
		case 0:
			c.token = "shared-token" // the first client's own token value
		case 1:
			c.token = float64(7) // a number, the same for several clients
		case 2:
			c.token = fmt.Sprintf("token-%d", i)
		} // case 3: no token, no progress
		others[i] = c
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	began := time.Now()
	seen := make(chan map[string]any, 64)
	firstDone := make(chan struct{})
	go func() { defer close(firstDone); first.post(ctx, url, seen) }()
	// Its first progress says the call runs on the child: now the 20 others, all at once.
	if m, ok := <-seen; !ok || m["method"] != "notifications/progress" {
		<-firstDone
		t.Fatalf("the first client's call began with %v (%v)", m, first.err)
	}
	var wg sync.WaitGroup
	for _, c := range others {
		wg.Add(1)
		go func() { defer wg.Done(); c.post(ctx, url, nil) }()
	}
	wg.Wait()
	othersTook := time.Since(began)
	// The others ended while the first call still ran: its result had not come yet.
	resultBefore := false
	for drained := false; !drained; {
		select {
		case m, ok := <-seen:
			if !ok {
				drained = true
			} else if m["id"] != nil {
				resultBefore = true
			}
		default:
			drained = true
		}
	}
	if resultBefore {
		t.Fatalf("the first call ended before the 20 others did (%v): they did not run beside it", othersTook)
	}
	for range seen { // the rest of the first call
	}
	<-firstDone
	if err := first.check(); err != nil {
		t.Errorf("the first client: %v", err)
	}
	progress := 0
	for _, c := range others {
		if err := c.check(); err != nil {
			t.Errorf("client %s (token %v, %d steps): %v", c.id, c.token, c.steps, err)
		}
		progress += len(c.msgs) - 1
	}
	t.Logf("21 concurrent calls of one stdio child: %d progress notifications, each to its own client; the 20 others took %v, all %v",
		first.steps+progress, othersTook.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

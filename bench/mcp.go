package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
)

// benchMCP measures /mcp: tools/list and tools/call lemonade_list_models through the edge,
// the same request sent straight to mcpgateway's HttpService over gRPC (the edge hop's cost), and the
// memory of 10,000 idle sessions.
func benchMCP(binDir, _ string, warm, dur time.Duration) error {
	s, err := startSuite(binDir, strings.Fields(os.Getenv("ZEST_BENCH_ENV"))...)
	if err != nil {
		return err
	}
	defer s.stop()
	session, err := initSession(s.url)
	if err != nil {
		return err
	}
	var clients []*loadClient
	defer func() {
		for _, lc := range clients {
			lc.close()
		}
	}()
	post := func(body string) func() error {
		lc, err := newLoadClient(s.url+"/mcp", http.Header{"Content-Type": {"application/json"},
			"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {session}}, body)
		if err != nil {
			panic(err) // the URL is ours
		}
		clients = append(clients, lc)
		return func() error {
			code, b, err := lc.do()
			if err != nil {
				return err
			}
			if code != 200 || !bytes.Contains(b, []byte(`"result"`)) {
				return statusError(code, b)
			}
			return nil
		}
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lemonade_list_models","arguments":{}}}`

	cc, err := grpcdial.Dial(s.mcpgatewayAddr, "", 0)
	if err != nil {
		return err
	}
	defer cc.Close()
	mc := mcpgatewayv1.NewHttpServiceClient(cc)
	direct := func(body string) func() error {
		return func() error {
			st, err := mc.Exchange(context.Background())
			if err != nil {
				return err
			}
			if err := st.Send(&mcpgatewayv1.HttpServiceExchangeRequest{Kind: &mcpgatewayv1.HttpServiceExchangeRequest_Request{Request: &mcpgatewayv1.HttpRequest{
				Method: "POST", Path: "/mcp", Body: []byte(body), Headers: []*mcpgatewayv1.HttpHeader{
					{Name: "Content-Type", Values: []string{"application/json"}}, {Name: "Accept", Values: []string{"application/json, text/event-stream"}},
					{Name: "Mcp-Session-Id", Values: []string{session}}}}}}); err != nil {
				return err
			}
			for {
				it, err := st.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				_ = it
			}
		}
	}

	fmt.Println("### /mcp: built-in tools through the edge")
	fmt.Println()
	fmt.Println("| request | concurrency | via edge calls/s | p50 | p99 | straight to mcpgateway (gRPC) calls/s | p50 | added p50 of the edge hop | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, rq := range []struct{ name, body string }{{"tools/list", list}, {"tools/call lemonade_list_models", call}} {
		for _, conc := range []int{1, 8, 64} {
			obs := &cpuObserver{roots: s.pids, profiles: s.profiles, label: fmt.Sprintf("mcp-%s-c%d", strings.Fields(rq.name)[0][6:], conc), window: dur}
			e := runObserved(conc, warm, dur, post(rq.body), obs)
			obs.report(conc, e.calls)
			d := run(conc, warm, dur, direct(rq.body))
			fmt.Printf("| %s | %d | %.0f | %s | %s | %.0f | %s | %s | %d/%d |\n", rq.name, conc, e.rate(), ms(e.p50), ms(e.p99),
				d.rate(), ms(d.p50), ms(e.p50-d.p50), e.errors, d.errors)
		}
	}
	fmt.Println()

	// 10,000 idle sessions: initialize them, then measure every service's RSS.
	runtime.GC()
	before := map[string]int{}
	for name, pid := range s.pids {
		before[name], _ = rssKB(pid)
	}
	const n = 10000
	for i := range n {
		if _, err := initSession(s.url); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
	}
	time.Sleep(time.Second)
	fmt.Printf("10,000 idle sessions: RSS before → after (all services)\n\n| service | before | after | added |\n|---|---|---|---|\n")
	total := 0
	for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-inference", "zest-toolhost"} {
		after, _ := rssKB(s.pids[name])
		total += after - before[name]
		fmt.Printf("| %s | %.1f MB | %.1f MB | %+.1f MB |\n", name, float64(before[name])/1024, float64(after)/1024, float64(after-before[name])/1024)
	}
	fmt.Printf("| all | | | %+.1f MB |\n\n", float64(total)/1024)
	return nil
}

func initSession(url string) (string, error) {
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; not measured
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		return "", fmt.Errorf("initialize: %d", resp.StatusCode)
	}
	return id, nil
}

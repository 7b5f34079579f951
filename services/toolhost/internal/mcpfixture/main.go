// Command mcpfixture is a stdio MCP server for tests, doing on demand what real servers
// won't: crash mid-call, hang, write garbage or a huge line, start slowly, answer out of
// order, send progress, ask the client for roots, show its environment, stop reading stdin,
// start a helper in a session of its own.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

var (
	outMu     sync.Mutex
	out       = bufio.NewWriter(os.Stdout)
	cancelled atomic.Int64
	extraTool atomic.Bool
	clientMu  sync.Mutex
	clientRes = map[string]chan msg{}
	clientSeq atomic.Int64
	seenMu    sync.Mutex
	seen      = map[string]bool{} // messages of the echo calls received
)

func write(v any) {
	b, _ := json.Marshal(v)
	outMu.Lock()
	defer outMu.Unlock()
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
}

func writeRaw(s string) {
	outMu.Lock()
	defer outMu.Unlock()
	out.WriteString(s)
	out.Flush()
}

func result(id json.RawMessage, r any) {
	write(map[string]any{"jsonrpc": "2.0", "id": id, "result": r})
}

func text(id json.RawMessage, s string) {
	result(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}})
}

func main() {
	delay := flag.Duration("start-delay", 0, "sleep before reading stdin")
	pages := flag.Int("pages", 2, "pages of tools/list")
	flag.Parse()
	fmt.Fprintln(os.Stderr, "mcpfixture starting")
	time.Sleep(*delay)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	for in.Scan() {
		var m msg
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			fmt.Fprintln(os.Stderr, "bad input:", err)
			continue
		}
		switch {
		case m.Method == "" && len(m.ID) > 0: // a response to our request
			clientMu.Lock()
			ch := clientRes[string(m.ID)]
			clientMu.Unlock()
			if ch != nil {
				ch <- m
			}
		case m.Method == "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m.Params, &p)
			v := p.ProtocolVersion
			if v != "2025-11-25" && v != "2025-06-18" && v != "2025-03-26" && v != "2024-11-05" {
				v = "2025-11-25"
			}
			result(m.ID, map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo": map[string]any{"name": "mcpfixture", "version": "1.0.0"}, "instructions": "mcpfixture is a test server"})
		case m.Method == "tools/list":
			listTools(m, *pages)
		case m.Method == "tools/call" && toolName(m) == "pause_reading":
			// Stop reading stdin until SIGUSR1, as a server stuck in its own work would.
			resume := make(chan os.Signal, 1)
			signal.Notify(resume, syscall.SIGUSR1)
			text(m.ID, "paused")
			<-resume
			signal.Stop(resume)
		case m.Method == "tools/call":
			if toolName(m) == "echo" {
				var p struct {
					Arguments struct{ Message string } `json:"arguments"`
				}
				json.Unmarshal(m.Params, &p)
				seenMu.Lock()
				seen[p.Arguments.Message] = true
				seenMu.Unlock()
			}
			go callTool(m)
		case m.Method == "notifications/cancelled":
			cancelled.Add(1)
		case strings.HasPrefix(m.Method, "notifications/"):
		case m.Method == "ping":
			result(m.ID, map[string]any{})
		default:
			write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
		}
	}
	fmt.Fprintln(os.Stderr, "mcpfixture: stdin closed")
}

func toolName(m msg) string {
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(m.Params, &p)
	return p.Name
}

var toolNames = []string{"echo", "slow", "crash", "hang", "garbage", "huge", "progress", "roots", "ping_client", "ask", "list_changed", "log", "cancelled_count", "env", "environ", "pause_reading", "seen", "spawn_setsid"}

func listTools(m msg, pages int) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(m.Params, &p)
	names := append([]string{}, toolNames...)
	if extraTool.Load() {
		names = append(names, "added_later")
	}
	page := 0
	fmt.Sscanf(p.Cursor, "page-%d", &page)
	per := (len(names) + pages - 1) / pages
	lo, hi := page*per, min((page+1)*per, len(names))
	var tools []any
	for _, n := range names[lo:hi] {
		tools = append(tools, map[string]any{"name": n, "description": "fixture tool " + n,
			"inputSchema": map[string]any{"type": "object"}})
	}
	r := map[string]any{"tools": tools}
	if hi < len(names) {
		r["nextCursor"] = fmt.Sprintf("page-%d", page+1)
	}
	result(m.ID, r)
}

func callTool(m msg) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
		Meta      struct {
			ProgressToken any `json:"progressToken"`
		} `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	num := func(k string, d float64) float64 {
		if v, ok := p.Arguments[k].(float64); ok {
			return v
		}
		return d
	}
	switch p.Name {
	case "echo":
		text(m.ID, fmt.Sprint(p.Arguments["message"]))
	case "slow":
		time.Sleep(time.Duration(num("ms", 100)) * time.Millisecond)
		text(m.ID, fmt.Sprint(p.Arguments["message"]))
	case "crash":
		fmt.Fprintln(os.Stderr, "fixture crashing on purpose")
		os.Exit(3)
	case "hang":
		select {}
	case "garbage":
		writeRaw("this is not json\n")
	case "huge":
		text(m.ID, strings.Repeat("x", int(num("bytes", 1<<20))))
	case "progress":
		n := int(num("n", 3))
		for i := range n {
			write(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
				"params": map[string]any{"progressToken": p.Meta.ProgressToken, "progress": i + 1, "total": n}})
		}
		text(m.ID, fmt.Sprintf("progress %d", n))
	case "roots", "ping_client", "ask":
		method := "roots/list"
		switch p.Name {
		case "ping_client":
			method = "ping"
		case "ask": // ask sends arguments.method to the client, arguments.n times at once
			method, _ = p.Arguments["method"].(string)
		}
		n := int(num("n", 1))
		answers := make([]string, n)
		var wg sync.WaitGroup
		for k := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[k] = askClient(method)
			}()
		}
		wg.Wait()
		text(m.ID, strings.Join(answers, "\n"))
	case "list_changed":
		extraTool.Store(true)
		write(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
		text(m.ID, "changed")
	case "log": // arguments.n notifications/message (default 1), then the answer
		n := int(num("n", 1))
		for i := range n {
			write(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
				"params": map[string]any{"level": "info", "data": fmt.Sprintf("log %d of %d", i+1, n)}})
		}
		text(m.ID, fmt.Sprintf("logged %d", n))
	case "cancelled_count":
		text(m.ID, fmt.Sprint(cancelled.Load()))
	case "env":
		text(m.ID, os.Getenv(fmt.Sprint(p.Arguments["name"])))
	case "spawn_setsid": // start `sleep 300` in a session of its own, as a daemon would; answer its pid
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if p.Arguments["hold"] == true { // keep the server's stdout and stderr open, as a careless helper does
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		}
		if err := cmd.Start(); err != nil {
			result(m.ID, map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": err.Error()}}})
			return
		}
		text(m.ID, fmt.Sprint(cmd.Process.Pid))
	case "seen": // whether an echo call with this message was received
		seenMu.Lock()
		text(m.ID, fmt.Sprint(seen[fmt.Sprint(p.Arguments["message"])]))
		seenMu.Unlock()
	case "environ": // the whole environment, as a JSON array of NAME=value
		b, _ := json.Marshal(os.Environ())
		text(m.ID, string(b))
	default:
		result(m.ID, map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "unknown tool " + p.Name}}})
	}
}

// askClient sends one request to the client and returns its answer as {"result":…,"error":…}.
func askClient(method string) string {
	id := fmt.Sprintf(`"srv-%d"`, clientSeq.Add(1))
	ch := make(chan msg, 1)
	clientMu.Lock()
	clientRes[id] = ch
	clientMu.Unlock()
	write(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": map[string]any{"asked": method}})
	r := <-ch
	b, _ := json.Marshal(map[string]any{"result": r.Result, "error": r.Error})
	return string(b)
}

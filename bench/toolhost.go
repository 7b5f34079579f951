package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	toolhostv1 "github.com/zestmcp/zest/proto/gen/zest/toolhost/v1"
)

// serviceKey is the tool host's service key in the benchmarks' suites.
const serviceKey = "bench-service-key-0123456789abcdef"

var echoParams = []byte(`{"name":"echo","arguments":{"message":"bench"}}`)

func benchToolhost(binDir, peers string, warm, dur time.Duration) error {
	entry, err := filepath.Abs(filepath.Join(peers, "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(entry); err != nil {
		return fmt.Errorf("server-everything is not installed (run make peers): %w", err)
	}

	// Direct: a minimal stdio client of our own process.
	direct, err := startDirect("node", entry)
	if err != nil {
		return err
	}
	defer direct.close()

	// Through the tool host binary over gRPC.
	th, addr, err := startToolhostProcess(filepath.Join(binDir, "zest-toolhost"))
	if err != nil {
		return err
	}
	defer func() { th.Process.Kill(); th.Wait() }()
	cc, err := grpcdial.Dial(addr, serviceKey, 0)
	if err != nil {
		return err
	}
	defer cc.Close()
	client := toolhostv1.NewToolHostServiceClient(cc)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = client.EnsureStarted(ctx, &toolhostv1.EnsureStartedRequest{Spec: &toolhostv1.ServerSpec{
			Id: "everything", Command: "node", Args: []string{entry}, TimeoutMs: 30000}})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("EnsureStarted: %w", err)
	}
	viaHost := func() error {
		r, err := client.Call(ctx, &toolhostv1.CallRequest{Id: "everything", Method: "tools/call", Params: echoParams})
		if err != nil {
			return err
		}
		if r.GetResult() == nil {
			return errors.New("no result")
		}
		return nil
	}

	fmt.Println("### toolhost: `echo` on server-everything")
	fmt.Println()
	fmt.Println("| concurrency | path | calls/s | p50 | p99 | ratio to direct (calls/s) | added p50 | errors | toolhost RSS now (peak) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, conc := range []int{1, 8, 64} {
		d := run(conc, warm, dur, direct.echo)
		fmt.Printf("| %d | direct stdio | %.0f | %s | %s | 1.00 | – | %d | – |\n", conc, d.rate(), ms(d.p50), ms(d.p99), d.errors)
		for _, path := range []struct {
			name string
			f    func() error
		}{{"toolhost Call (unary gRPC)", viaHost}} {
			h := run(conc, warm, dur, path.f)
			rss, peak := rssKB(th.Process.Pid)
			fmt.Printf("| %d | %s | %.0f | %s | %s | %.2f | %s | %d | %d MB (%d MB) |\n",
				conc, path.name, h.rate(), ms(h.p50), ms(h.p99), h.rate()/d.rate(), ms(h.p50-d.p50), h.errors, rss/1024, peak/1024)
		}
	}
	fmt.Println()
	noop := func() error {
		_, err := client.GetStatus(ctx, &toolhostv1.GetStatusRequest{Id: "everything"})
		return err
	}
	fmt.Println("Floor of the gRPC hop alone (GetStatus, no child involved):")
	fmt.Println()
	fmt.Println("| concurrency | calls/s | p50 | p99 |")
	fmt.Println("|---|---|---|---|")
	for _, conc := range []int{1, 64} {
		r := run(conc, warm, dur, noop)
		fmt.Printf("| %d | %.0f | %s | %s |\n", conc, r.rate(), ms(r.p50), ms(r.p99))
	}
	fmt.Println()
	return nil
}

func startToolhostProcess(bin string) (*exec.Cmd, string, error) {
	sock, err := reserve()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ZEST_TOOLHOST_ADDR="+sock.addr, "ZEST_LOG_LEVEL=warn", "LEMONADE_API_KEY=", "LEMONADE_ADMIN_API_KEY=", "ZEST_SERVICE_KEY="+serviceKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	cmd.Stderr = os.Stderr
	return cmd, sock.addr, startWith(cmd, sock)
}

// rssKB returns the current and peak resident set of pid, in KiB.
func rssKB(pid int) (cur, peak int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			cur = n
		case "VmHWM:":
			peak = n
		}
	}
	return cur, peak
}

// directClient is the smallest honest stdio MCP client: one writer, one reader, responses
// matched to callers by id. It is the baseline the tool host is compared with.
type directClient struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	mu      sync.Mutex
	w       *bufio.Writer
	pending sync.Map // id → chan []byte
	next    atomic.Int64
}

func startDirect(name string, args ...string) (*directClient, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &directClient{cmd: cmd, stdin: in, w: bufio.NewWriter(in)}
	go c.read(out)
	if _, err := c.call("initialize", []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)); err != nil {
		return nil, err
	}
	c.mu.Lock()
	_, _ = c.w.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n") // bufio keeps the error for Flush
	err = c.w.Flush()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *directClient) read(out io.Reader) {
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
			continue
		}
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			continue
		}
		if ch, ok := c.pending.LoadAndDelete(id); ok {
			ch.(chan []byte) <- line
		}
	}
}

func (c *directClient) call(method string, params []byte) ([]byte, error) {
	id := c.next.Add(1)
	ch := make(chan []byte, 1)
	c.pending.Store(id, ch)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	c.mu.Lock()
	_, _ = c.w.Write(b.Bytes()) // bufio keeps the error for Flush, checked below
	err := c.w.Flush()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case line := <-ch:
		return line, nil
	case <-time.After(30 * time.Second):
		return nil, errors.New("timeout")
	}
}

func (c *directClient) echo() error {
	line, err := c.call("tools/call", echoParams)
	if err != nil {
		return err
	}
	if !bytes.Contains(line, []byte("Echo: bench")) {
		return fmt.Errorf("unexpected answer %s", line)
	}
	return nil
}

func (c *directClient) close() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// Package stdio runs one stdio MCP server process and multiplexes any number of concurrent
// callers onto it: JSON-RPC ids are rewritten so that each response reaches its caller,
// progress notifications reach the caller whose token they carry, and a cancelled call sends
// notifications/cancelled. Messages are framed one per line (framing.go), and the bytes
// waiting for a child that does not read its stdin are bounded (stdin.go).
//
// The child runs in its own process group with a parent-death signal, normally under the
// shim (package shim), which kills every descendant of the server when it ends. Stopping a
// child closes its stdin and waits StopGrace for it to exit; then, under a shim, SIGTERMs the
// shim alone (which passes SIGTERM on to every descendant, waits the same grace, SIGKILLs them
// all and reaps them) and waits for it up to StopGrace + shim.CleanupTimeout + 1 s; without a
// shim, SIGTERMs the group and waits StopGrace. Only then, as a last resort, it SIGKILLs the
// group.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/tracing"
	"github.com/zestmcp/zest/services/toolhost/shim"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Options.
const (
	// DefaultMaxLineBytes is the largest answer that fits in a gRPC message of Zest's default
	// size with room for the fields around it: a longer line could never be sent back.
	DefaultMaxLineBytes    = grpcdial.DefaultMaxBodyBytes
	DefaultStderrTailBytes = 16 << 10
	DefaultMaxInFlight     = 256
	DefaultStopGrace       = 2 * time.Second
	// DefaultMaxStdinQueueBytes bounds the bytes of requests waiting for a child that does not
	// read its stdin, beyond what the pipe holds (64 KiB on Linux).
	DefaultMaxStdinQueueBytes = 4 << 20
)

// Options say how to run a child.
type Options struct {
	// Path is the executable; Args its arguments (without argv[0]).
	Path string
	Args []string
	// Dir is the working directory (empty: the caller's).
	Dir string
	// Env is the child's complete environment.
	Env []string
	// Shim, when set, is the argv prefix of a process that runs the server for the tool host
	// (see package shim; its -stop-grace should be StopGrace): the child is then the shim,
	// with a parent-death signal of SIGTERM so that it can take every descendant of the
	// server down with it.
	Shim []string
	// MaxLineBytes bounds one stdout line; a longer line is a protocol failure that stops the
	// child (its answer could not be returned anyway).
	MaxLineBytes int
	// StderrTailBytes bounds the stderr kept for diagnostics.
	StderrTailBytes int
	// MaxInFlight bounds concurrent calls; more fail with ErrBusy.
	MaxInFlight int
	// MaxStdinQueueBytes bounds the bytes queued for stdin while the child does not read: a
	// call whose request does not fit waits for room with its context, and fails alone, its
	// request unsent, when that ends. A larger request is sent alone once the queue is empty.
	MaxStdinQueueBytes int
	// StopGrace is how long each stop step waits (after closing stdin, after SIGTERM).
	StopGrace time.Duration
	// OnNotification receives notifications not tied to a call (e.g. tools/list_changed).
	OnNotification func(method string, msg []byte)
	// OnRequest answers requests from the child other than ping and the relayable ones
	// (sampling/createMessage, elicitation/create, roots/list: see CallWith); nil answers
	// -32601.
	OnRequest func(method string, params json.RawMessage) (json.RawMessage, *RPCError)
	// MaxRelays bounds the child's requests waiting for callers' clients; more are answered
	// with an error.
	MaxRelays int
	// OrphanWindow is how long a call its caller gave up on still counts as in flight when a
	// request of the child is attributed.
	OrphanWindow time.Duration
	// OnExit is called once when the child has exited, with the reason.
	OnExit func(err error)
	Logger *slog.Logger
}

// Conn is a running child.
type Conn struct {
	opts    Options
	cmd     *exec.Cmd
	stdin   *os.File
	stdout  *os.File
	stderrR *os.File
	sem     chan struct{}
	nextID  atomic.Int64
	stderr  *tail

	// in writes to stdin: concurrent writes combined, each message whole, the bytes waiting
	// for the child bounded (MaxStdinQueueBytes).
	in *stdinQueue

	mu       sync.Mutex
	pending  map[int64]*call
	progress map[string]*call
	// orphans are calls given up on (cancelled, timed out) that the child has not answered,
	// with when they stop counting as in flight for attribution.
	orphans    map[int64]time.Time
	relayCount int          // requests of the child waiting for callers' clients
	relaysOver atomic.Int64 // requests of the child refused at MaxRelays
	exitErr    error        // set once the child is gone
	exited     atomic.Bool  // exitErr is set: Err takes the lock only then
	done       chan struct{}
	stopping   atomic.Bool
	readDone   chan struct{}
	errDone    chan struct{}
}

type call struct {
	id          int64
	resp        chan response
	hooks       Hooks
	token       string
	callerToken json.RawMessage
	relays      map[*relay]struct{} // requests of the child waiting for this caller's client (under Conn.mu)
}

type response struct {
	result json.RawMessage
	err    *RPCError
}

func (opts Options) withDefaults() Options {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.StderrTailBytes <= 0 {
		opts.StderrTailBytes = DefaultStderrTailBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxStdinQueueBytes <= 0 {
		opts.MaxStdinQueueBytes = DefaultMaxStdinQueueBytes
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.MaxRelays <= 0 {
		opts.MaxRelays = DefaultMaxRelays
	}
	if opts.OrphanWindow <= 0 {
		opts.OrphanWindow = DefaultOrphanWindow
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return opts
}

// Start launches the child.
func Start(opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(opts.Path, opts.Args...)
	deathSig := syscall.SIGKILL
	if len(opts.Shim) > 0 {
		cmd = exec.Command(opts.Shim[0], append(append(opts.Shim[1:len(opts.Shim):len(opts.Shim)], "--", opts.Path), opts.Args...)...)
		deathSig = syscall.SIGTERM
	}
	cmd.Dir = opts.Dir
	cmd.Env = opts.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	err = startOnLockedThread(cmd)
	closeAll(inR, outW, errW) // the child holds its ends
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("%w %q: %w", ErrLaunch, opts.Path, err)
	}
	c := newConn(opts, inW)
	c.cmd, c.stdout, c.stderrR = cmd, outR, errR
	go c.readLoop()
	go c.stderrLoop()
	go c.waitLoop()
	return c, nil
}

// newConn returns a Conn writing to stdin, with opts' defaults applied, before any process
// or loop is attached.
func newConn(opts Options, stdin *os.File) *Conn {
	return &Conn{
		opts: opts, stdin: stdin, in: newStdinQueue(stdin, opts.MaxStdinQueueBytes),
		sem:    make(chan struct{}, opts.MaxInFlight),
		stderr: newTail(opts.StderrTailBytes), pending: map[int64]*call{}, progress: map[string]*call{}, orphans: map[int64]time.Time{},
		done: make(chan struct{}), readDone: make(chan struct{}), errDone: make(chan struct{}),
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// Pid is the child's process id (also its process group id).
func (c *Conn) Pid() int { return c.cmd.Process.Pid }

// Done is closed when the child has exited and every in-flight call has failed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the child exited (nil while it runs).
func (c *Conn) Err() error {
	if !c.exited.Load() { // every call asks; the lock is shared with the call path
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitErr
}

// StderrTail returns the last bytes the child wrote to stderr.
func (c *Conn) StderrTail() string { return c.stderr.String() }

// InFlight counts calls waiting for an answer.
func (c *Conn) InFlight() int { return len(c.sem) }

// Call sends one request and waits for its answer. params must be a JSON object or array
// (or empty); pretty-printed params are compacted onto one line, and params that are not JSON
// fail with ErrBadRequest before anything is written. onProgress (may be nil) receives the
// call's progress notifications with the caller's own progress token. The child's requests
// during the call are answered by the tool host (see CallWith).
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage, onProgress func([]byte)) (json.RawMessage, error) {
	return c.CallWith(ctx, method, params, Hooks{OnProgress: onProgress})
}

// CallWith is Call with the hooks of a caller that may relay the child's requests to its
// MCP client: a sampling/createMessage, elicitation/create or roots/list of the child goes to
// hooks.OnRequest when this call is the only one in flight on the child and hooks.Accepts
// its method (see attribute). Requests still waiting when the call ends are answered with an
// error.
func (c *Conn) CallWith(ctx context.Context, method string, params json.RawMessage, hooks Hooks) (json.RawMessage, error) {
	if err := checkMethod(method); err != nil {
		return nil, err
	}
	params, err := normalizeParams(params)
	if err != nil {
		return nil, err
	}
	// The child's part of a call as a span (when tracing is on): from writing the request to
	// its stdin to reading the answer from its stdout. The span name carries the method alone;
	// the tool, when there is one, is an attribute.
	ctx, span := tracing.Start(ctx, "stdio "+method, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("mcp.method.name", method), attribute.Int("process.pid", c.Pid()))
		if method == "tools/call" {
			var p struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(params, &p) == nil && p.Name != "" {
				span.SetAttributes(attribute.String("gen_ai.tool.name", p.Name))
			}
		}
	}
	res, err := c.callWith(ctx, method, params, hooks)
	return res, tracing.End(span, err)
}

// callWith is CallWith once the method and params are checked.
func (c *Conn) callWith(ctx context.Context, method string, params json.RawMessage, hooks Hooks) (json.RawMessage, error) {
	select {
	case c.sem <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %d calls are waiting on this server (limit %d); retry later", ErrBusy, len(c.sem), cap(c.sem))
	}
	defer func() { <-c.sem }()

	cl := &call{id: c.nextID.Add(1), resp: make(chan response, 1), hooks: hooks}
	if bytes.Contains(params, []byte(`"progressToken"`)) {
		token := "zest-" + strconv.FormatInt(cl.id, 10)
		p, tok := rewriteProgressToken(params, token)
		params, cl.callerToken = p, tok
		if tok != nil {
			cl.token = token
		}
	}
	c.mu.Lock()
	if c.exitErr != nil {
		err := c.exitErr
		c.mu.Unlock()
		return nil, err
	}
	c.pending[cl.id] = cl
	if cl.token != "" {
		c.progress[cl.token] = cl
	}
	c.mu.Unlock()
	defer c.endRelays(cl)

	msg := appendRequest(make([]byte, 0, 64+len(method)+len(params)), cl.id, method, params)

	if err := c.in.write(ctx, msg); err != nil {
		c.forget(cl)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) { // no room in time: nothing was sent
			return nil, err
		}
		// A broken stdin means the child is going: report why it went, once it is reaped.
		if c.waitDone(c.opts.StopGrace) {
			return nil, c.Err()
		}
		return nil, fmt.Errorf("%w: writing to stdin: %w", ErrExited, err)
	}
	select {
	case r := <-cl.resp:
		if r.err != nil {
			return nil, r.err
		}
		return r.result, nil
	case <-ctx.Done():
		c.forget(cl)
		c.mu.Lock()
		if c.exitErr == nil {
			c.orphans[cl.id] = time.Now().Add(c.opts.OrphanWindow)
		}
		c.mu.Unlock()
		reason := "request cancelled by the caller"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "request timed out"
		}
		c.notifyAsync("notifications/cancelled", map[string]any{"requestId": cl.id, "reason": reason})
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.Err()
	}
}

func (c *Conn) forget(cl *call) {
	c.mu.Lock()
	delete(c.pending, cl.id)
	if cl.token != "" {
		delete(c.progress, cl.token)
	}
	c.mu.Unlock()
}

// Notify sends a notification to the child, waiting with ctx for room in its stdin queue.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	msg, err := notification(method, params)
	if err != nil {
		return err
	}
	return c.in.write(ctx, msg)
}

func (c *Conn) notifyAsync(method string, params any) {
	if msg, err := notification(method, params); err == nil {
		_ = c.in.control(msg) // a lost cancellation only wastes the child's work
	}
}

func notification(method string, params any) ([]byte, error) {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	b, err := json.Marshal(m)
	return append(b, '\n'), err
}

func (c *Conn) readLoop() {
	defer close(c.readDone)
	r := bufio.NewReaderSize(c.stdout, 64<<10)
	var long []byte // a line longer than r's buffer, gathered
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) || long != nil {
			long = append(long, line...)
			if n := len(bytes.TrimSuffix(long, []byte{'\n'})); n > c.opts.MaxLineBytes {
				c.protocolFailure(fmt.Errorf("%w: a stdout line exceeds the tool host's limit of %d bytes (toolhost-max-line-bytes), so its answer could not be returned", ErrProtocol, c.opts.MaxLineBytes))
				return
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			line, long = long, nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if perr := c.handleLine(line); perr != nil {
				c.protocolFailure(perr)
				return
			}
		}
		if err != nil {
			return // EOF: waitLoop reports the exit
		}
	}
}

// handleLine handles one line of the child's stdout: a message, or a batch of them (a JSON
// array, which 2025-03-26 servers may send). The error is a protocol failure.
func (c *Conn) handleLine(line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil {
			return fmt.Errorf("%w: stdout line is not a JSON-RPC batch (%q)", ErrProtocol, truncate(line, 120))
		}
		for _, raw := range batch {
			if err := c.handleMessage(raw); err != nil {
				return err
			}
		}
		return nil
	}
	return c.handleMessage(line)
}

func (c *Conn) handleMessage(raw []byte) error {
	m, method, k, err := classify(raw)
	if err != nil {
		return err
	}
	switch k {
	case kindRequest:
		c.answerRequest(m.ID, method, m.Params)
	case kindBadRequest:
		if m.hasID() {
			c.answer(m.ID, nil, &RPCError{Code: -32600, Message: "Invalid Request: method must be a non-empty string"})
		}
	case kindNotification:
		if method == "notifications/progress" && c.deliverProgress(m.Params) {
			return nil
		}
		if c.opts.OnNotification != nil {
			c.opts.OnNotification(method, bytes.Clone(raw))
		}
	case kindResponse:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return nil // not an id we issued: ignore
		}
		c.mu.Lock()
		cl := c.pending[id]
		delete(c.pending, id)
		delete(c.orphans, id)
		if cl != nil && cl.token != "" {
			delete(c.progress, cl.token)
		}
		c.mu.Unlock()
		if cl != nil {
			if cl.hooks.OnAnswer != nil {
				cl.hooks.OnAnswer()
			}
			cl.resp <- response{result: m.Result, err: responseError(m.Error)}
		}
	}
	return nil
}

func (c *Conn) deliverProgress(params json.RawMessage) bool {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	var tok string
	if json.Unmarshal(p["progressToken"], &tok) != nil {
		return false
	}
	c.mu.Lock()
	cl := c.progress[tok]
	c.mu.Unlock()
	if cl == nil {
		return false
	}
	if cl.hooks.OnProgress != nil {
		p["progressToken"] = cl.callerToken
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": p})
		if err == nil {
			cl.hooks.OnProgress(b)
		}
	}
	return true
}

func (c *Conn) answerRequest(id json.RawMessage, method string, params json.RawMessage) {
	switch {
	case method == "ping":
		c.answer(id, json.RawMessage(`{}`), nil)
	case relayable(method):
		c.attribute(id, method, params)
	case c.opts.OnRequest != nil:
		result, rpcErr := c.opts.OnRequest(method, params)
		c.answer(id, result, rpcErr)
	default:
		c.answer(id, nil, &RPCError{Code: -32601, Message: "Method not found: no client of the tool host relays " + method})
	}
}

// answer sends the response to a request of the child.
func (c *Conn) answer(id, result json.RawMessage, rpcErr *RPCError) {
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		resp["error"] = rpcErr
	} else {
		resp["result"] = result
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	_ = c.in.answer(append(b, '\n')) // dropped only when the child has long stopped reading its stdin
}

func (c *Conn) protocolFailure(err error) {
	c.mu.Lock()
	if c.exitErr == nil {
		c.exitErr = err
		c.exited.Store(true)
	}
	c.mu.Unlock()
	c.opts.Logger.Warn("stopping MCP server: protocol failure", "pid", c.Pid(), "err", err)
	go c.Stop() //nolint:errcheck // the exit is reported through waitLoop
	_, _ = io.Copy(io.Discard, c.stdout)
}

func (c *Conn) stderrLoop() {
	defer close(c.errDone)
	buf := make([]byte, 4096)
	for {
		n, err := c.stderrR.Read(buf)
		if n > 0 {
			c.stderr.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// waitLoop reaps the child, kills what is left of its process group, and fails every
// in-flight call.
func (c *Conn) waitLoop() {
	werr := c.cmd.Wait()
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) // grandchildren of a wrapper
	c.in.close(fmt.Errorf("%w: stdin is closed", ErrExited))
	c.stdin.Close()
	// Read what the child wrote before it died (its last stderr line explains the crash).
	grace := time.After(c.opts.StopGrace)
	for _, d := range []struct {
		done chan struct{}
		f    *os.File
	}{{c.readDone, c.stdout}, {c.errDone, c.stderrR}} {
		select {
		case <-d.done:
		case <-grace:
			d.f.Close() // a stray process still holds the pipe
			<-d.done
		}
	}
	c.stdout.Close()
	c.stderrR.Close()

	c.mu.Lock()
	if c.exitErr == nil {
		switch {
		case c.stopping.Load():
			c.exitErr = fmt.Errorf("%w: %w", ErrExited, ErrStopped)
		case werr != nil:
			c.exitErr = fmt.Errorf("%w: %v", ErrExited, werr)
		default:
			c.exitErr = fmt.Errorf("%w: exit status 0", ErrExited)
		}
		if t := stderrSummary(c.stderr.String()); t != "" && !c.stopping.Load() {
			c.exitErr = fmt.Errorf("%w; stderr: %s", c.exitErr, t)
		}
	}
	c.exited.Store(true)
	err := c.exitErr
	c.pending = map[int64]*call{} // waiters select on c.done and return c.Err()
	c.progress = map[string]*call{}
	clear(c.orphans)
	c.mu.Unlock()
	close(c.done)
	if c.opts.OnExit != nil {
		c.opts.OnExit(err)
	}
}

// shimExitAllowance is how long a shim has, after the grace it gives the server, to kill and
// reap its descendants and exit.
const shimExitAllowance = shim.CleanupTimeout + time.Second

// Stop closes stdin and waits; then SIGTERMs the shim (which stops the server and cleans up)
// or, without one, the process group, and waits again; then SIGKILLs the group. It returns
// once the child is reaped.
func (c *Conn) Stop() error {
	c.stopping.Store(true)
	c.stdin.Close()
	if c.waitDone(c.opts.StopGrace) {
		return nil
	}
	pid := c.cmd.Process.Pid
	if len(c.opts.Shim) > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if c.waitDone(c.opts.StopGrace + shimExitAllowance) {
			return nil
		}
		c.opts.Logger.Warn("the shim did not stop the MCP server in time; killing its process group", "pid", pid)
	} else {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		if c.waitDone(c.opts.StopGrace) {
			return nil
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-c.done
	return nil
}

func (c *Conn) waitDone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// truncate cuts s to at most n bytes on a rune boundary and marks the cut; it takes a line
// of the child's as it is, without copying all of it.
func truncate[T ~string | ~[]byte](s T, n int) string {
	if len(s) <= n {
		return string(s)
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // inside a multi-byte rune
		n--
	}
	return string(s[:n]) + "…"
}

package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/waitfor"
)

// wire is a Conn with no process: what it writes to the child's stdin is collected.
type wire struct {
	*Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func newWire(t testing.TB) *wire {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	wr := &wire{Conn: newConn(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults(), w)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			wr.mu.Lock()
			wr.out.Write(buf[:n])
			wr.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { w.Close(); <-done; r.Close() })
	return wr
}

// written returns and forgets what was written so far.
func (w *wire) written() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.out.String()
	w.out.Reset()
	return s
}

// pend registers a call as Call does, with a progress token when token is not empty.
func (w *wire) pend(id int64, token string, onProgress func([]byte)) *call {
	cl := &call{id: id, resp: make(chan response, 1), hooks: Hooks{OnProgress: onProgress}, token: token, callerToken: json.RawMessage(`"caller"`)}
	w.Conn.mu.Lock()
	defer w.Conn.mu.Unlock()
	w.pending[id] = cl
	if token != "" {
		w.progress[token] = cl
	}
	return cl
}

func TestNormalizeParams(t *testing.T) {
	cases := []struct {
		name, in, want string
		bad            string // substring of the ErrBadRequest error; empty: accepted
	}{
		{"absent", "", "", ""},
		{"null", " null ", "", ""},
		{"one line is kept as is", `{"a": 1, "b": [1, 2]}`, `{"a": 1, "b": [1, 2]}`, ""},
		{"pretty-printed is compacted", "{\n  \"name\": \"echo\",\n  \"arguments\": {\"message\": \"a\\nb\"}\r\n}\n", `{"name":"echo","arguments":{"message":"a\nb"}}`, ""},
		{"array", "[1,\n2]", `[1,2]`, ""},
		{"truncated", `{"name":"echo"`, "", "not valid JSON"},
		{"trailing garbage", `{"a":1} x`, "", "not valid JSON"},
		{"pretty and broken", "{\n\"a\":\n}", "", "not valid JSON"},
		{"a number", `42`, "", "must be a JSON object or array"},
		{"a string", `"x"`, "", "must be a JSON object or array"},
		{"not JSON", `hello`, "", "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalizeParams(json.RawMessage(tc.in))
			if tc.bad != "" {
				if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err = %v, want ErrBadRequest with %q", err, tc.bad)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAppendRequestIsOneLineOfJSON(t *testing.T) {
	for _, method := range []string{"tools/call", "a\"b\\c", "line\nbreak", "tab\tand\x00nul", "ünïcode/✓", "\x7f"} {
		msg := appendRequest(nil, 7, method, json.RawMessage(`{"a":1}`))
		if bytes.IndexByte(msg, '\n') != len(msg)-1 {
			t.Errorf("method %q: %q is not one line", method, msg)
		}
		var m struct {
			ID     int64
			Method string
			Params map[string]int
		}
		if err := json.Unmarshal(msg, &m); err != nil || m.ID != 7 || m.Method != method || m.Params["a"] != 1 {
			t.Errorf("method %q: %q decodes to %+v, %v", method, msg, m, err)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name, line string
		kind       kind
		method     string
	}{
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, kindResponse, ""},
		{"error response", `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`, kindResponse, ""},
		{"request", `{"jsonrpc":"2.0","id":"a","method":"ping"}`, kindRequest, "ping"},
		{"request with id 0", `{"id":0,"method":"roots/list"}`, kindRequest, "roots/list"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, kindNotification, "notifications/progress"},
		{"null id is a notification", `{"id":null,"method":"x"}`, kindNotification, "x"},
		{"empty method with an id is not an answer", `{"id":3,"method":"","result":{}}`, kindBadRequest, ""},
		{"null method", `{"id":3,"method":null}`, kindBadRequest, ""},
		{"number method", `{"id":3,"method":5,"result":{}}`, kindBadRequest, ""},
		{"method in another case", `{"id":3,"Method":"ping"}`, kindRequest, "ping"},
		{"method and result", `{"id":3,"method":"x","result":{}}`, kindRequest, "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, method, k, err := classify([]byte(tc.line))
			if err != nil || k != tc.kind || method != tc.method {
				t.Fatalf("classify = %v %q %v, want %v %q", k, method, err, tc.kind, tc.method)
			}
		})
	}
	for _, bad := range []string{`not json`, `"a string"`, `42`, `[1]`, `{"id":1`} {
		if _, _, _, err := classify([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("classify(%s) = %v, want ErrProtocol", bad, err)
		}
	}
}

// TestARequestIsNeverTakenForAnAnswer: a message with a method does not complete the pending
// call whose id it carries; the child gets -32600, or the tool host's own answer, instead.
func TestARequestIsNeverTakenForAnAnswer(t *testing.T) {
	w := newWire(t)
	cl := w.pend(3, "", nil)
	for _, line := range []string{`{"jsonrpc":"2.0","id":3,"method":"","result":{"x":1}}`, `{"jsonrpc":"2.0","id":3,"method":"elicitation/create","result":{}}`} {
		if err := w.handleLine([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-cl.resp:
		t.Fatalf("call 3 answered by a request: %+v", r)
	default:
	}
	waitfor.True(t, 10*time.Second, "two answers written to the child", func() bool { return strings.Count(w.peek(), "\n") == 2 })
	if out := w.written(); !strings.Contains(out, `"code":-32600`) || !strings.Contains(out, `no client of the call in flight accepts elicitation/create`) {
		t.Fatalf("answers to the child: %s", out)
	}
	if err := w.handleLine([]byte(`{"jsonrpc":"2.0","id":3,"result":{"x":1}}`)); err != nil {
		t.Fatal(err)
	}
	if r := <-cl.resp; string(r.result) != `{"x":1}` {
		t.Fatalf("the answer: %+v", r)
	}
}

func (w *wire) peek() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

func TestBatchFromTheChild(t *testing.T) {
	w := newWire(t)
	var progress [][]byte
	a := w.pend(1, "zest-1", func(b []byte) { progress = append(progress, b) })
	b := w.pend(2, "", nil)
	line := `[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"zest-1","progress":1}},` +
		`{"jsonrpc":"2.0","id":1,"result":{"n":1}},{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no"}}]`
	if err := w.handleLine([]byte(line)); err != nil {
		t.Fatal(err)
	}
	if r := <-a.resp; string(r.result) != `{"n":1}` || len(progress) != 1 || !strings.Contains(string(progress[0]), `"progressToken":"caller"`) {
		t.Fatalf("call 1: %+v, progress %q", r, progress)
	}
	if r := <-b.resp; r.err == nil || r.err.Code != -32000 {
		t.Fatalf("call 2: %+v", r)
	}
	if err := w.handleLine([]byte(`[{"id":1},"x"]`)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("batch with a non-object: %v", err)
	}
}

func TestMalformedErrorObjectStillAnswers(t *testing.T) {
	w := newWire(t)
	cl := w.pend(5, "", nil)
	if err := w.handleLine([]byte(`{"jsonrpc":"2.0","id":5,"error":"it broke"}`)); err != nil {
		t.Fatal(err)
	}
	if r := <-cl.resp; r.err == nil || r.err.Code != -32603 || string(r.err.Data) != `"it broke"` {
		t.Fatalf("answer %+v", r)
	}
}

// FuzzHandleLine feeds one stdout line to a Conn with pending calls: it must never panic, a
// line that is a JSON object or a batch of them is never a protocol failure, and a message
// with a "method" member is a request or a notification whatever its id, never an answer.
func FuzzHandleLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"","result":{}}`,
		`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"zest-1","progress":1,"total":2}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"id":null,"method":"x"}`,
		`{"id":2,"Method":null}`,
		`[{"id":1,"result":1},{"method":"notifications/message","params":{"level":"info"}}]`,
		`[]`, `null`, `{}`, `not json`, `"str"`, `{"id":1,"error":"bad"}`, `{"id":9223372036854775808,"result":{}}`,
	} {
		f.Add([]byte(s))
	}
	w := newWire(f)
	w.opts.OnNotification = func(string, []byte) {}
	f.Fuzz(func(t *testing.T, line []byte) {
		calls := []*call{w.pend(1, "zest-1", func([]byte) {}), w.pend(2, "", nil), w.pend(7, "", nil)}
		err := w.handleLine(line)

		msgs := [][]byte{bytes.TrimSpace(line)}
		if first := msgs[0]; len(first) > 0 && first[0] == '[' {
			var batch []json.RawMessage
			if json.Unmarshal(first, &batch) != nil {
				msgs = nil
			} else {
				msgs = msgs[:0]
				for _, m := range batch {
					msgs = append(msgs, m)
				}
			}
		}
		allObjects, allRequests := msgs != nil, true
		for _, raw := range msgs {
			var obj map[string]json.RawMessage
			isObject := len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &obj) == nil
			allObjects = allObjects && isObject
			hasMethod := false
			for k := range obj {
				hasMethod = hasMethod || strings.EqualFold(k, "method")
			}
			allRequests = allRequests && isObject && hasMethod
			_, method, k, cerr := classify(raw)
			switch {
			case isObject && cerr != nil:
				t.Fatalf("classify(%s): %v", raw, cerr)
			case !json.Valid(raw) && cerr == nil:
				t.Fatalf("classify(%s) accepted what is not JSON", raw)
			case cerr != nil:
			case hasMethod && k == kindResponse:
				t.Fatalf("classify(%s): a message with a method taken for a response", raw)
			case !hasMethod && k != kindResponse:
				t.Fatalf("classify(%s) = %v, want a response", raw, k)
			case (k == kindRequest || k == kindNotification) && method == "":
				t.Fatalf("classify(%s) = %v with an empty method", raw, k)
			}
		}
		if allObjects && err != nil {
			t.Fatalf("handleLine(%s) = %v for JSON objects", line, err)
		}
		for _, cl := range calls {
			select {
			case r := <-cl.resp:
				if allRequests {
					t.Fatalf("handleLine(%s) answered call %d with %+v", line, cl.id, r)
				}
			default:
				w.forget(cl)
			}
		}
		w.written()
	})
}

// FuzzRewriteProgressToken: for any params normalizeParams accepts, the rewrite never panics;
// for a JSON object it replaces _meta.progressToken (returning the caller's) and changes
// nothing else.
func FuzzRewriteProgressToken(f *testing.F) {
	for _, s := range []string{
		`{"name":"x","_meta":{"progressToken":"mine"}}`,
		`{"name":"x","_meta":{"progressToken":42,"other":true}}`,
		`{"_meta":null}`, `{"_meta":"str"}`, `{"_meta":{}}`, `{}`, `[{"_meta":{"progressToken":1}}]`,
		`{"_meta":{"progressToken":1},"_meta":{}}`, `{"a":"<&>","_meta":{"progressToken":{"nested":[1,2]}}}`, `null`, `"progressToken"`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		params, err := normalizeParams(params)
		if err != nil {
			return
		}
		out, orig := rewriteProgressToken(params, "zest-9")
		var in any
		json.Unmarshal(params, &in)
		obj, _ := in.(map[string]any)
		meta, _ := obj["_meta"].(map[string]any)
		want, has := meta["progressToken"]
		if !has {
			if !bytes.Equal(out, params) || orig != nil {
				t.Fatalf("rewrite(%s) without a token = %s, %s", params, out, orig)
			}
			return
		}
		var gotOrig, got any
		if json.Unmarshal(orig, &gotOrig) != nil || !reflect.DeepEqual(gotOrig, want) {
			t.Fatalf("rewrite(%s): caller's token %s, want %v", params, orig, want)
		}
		if json.Unmarshal(out, &got) != nil {
			t.Fatalf("rewrite(%s) = %q, not JSON", params, out)
		}
		meta["progressToken"] = "zest-9"
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("rewrite(%s) = %s, want only the token changed", params, out)
		}
	})
}

// FuzzRequestFraming: whatever a caller passes, what is written is one line of JSON with the
// caller's method and params, or nothing at all (ErrBadRequest).
func FuzzRequestFraming(f *testing.F) {
	f.Add("tools/call", []byte("{\n  \"name\": \"echo\"\n}"))
	f.Add("a\"b\n", []byte(`[1, 2]`))
	f.Add("x", []byte(`{"a":1} {"b":2}`))
	f.Add("x", []byte(`5`))
	f.Add("", []byte(``))
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		p, err := normalizeParams(params)
		if merr := checkMethod(method); merr != nil {
			if method != "" && utf8.ValidString(method) {
				t.Fatalf("method %q refused: %v", method, merr)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("normalizeParams(%q): %v", params, err)
			}
			if tp := bytes.TrimSpace(params); json.Valid(tp) && (tp[0] == '{' || tp[0] == '[') {
				t.Fatalf("normalizeParams(%q) refused an object or array: %v", params, err)
			}
			return
		}
		msg := appendRequest(nil, 1, method, p)
		if bytes.IndexByte(msg, '\n') != len(msg)-1 || bytes.IndexByte(msg, '\r') >= 0 {
			t.Fatalf("request %q is not one line", msg)
		}
		var m struct {
			Method string
			Params json.RawMessage
		}
		if err := json.Unmarshal(msg, &m); err != nil || m.Method != method {
			t.Fatalf("request %q: method %q, %v", msg, m.Method, err)
		}
		var want, got any
		json.Unmarshal(params, &want)
		json.Unmarshal(m.Params, &got)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("request %q carries params %s, want %s", msg, m.Params, params)
		}
	})
}

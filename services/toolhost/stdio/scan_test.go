package stdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// classifyStdlib is classify as it was, with encoding/json: FuzzClassify's reference.
func classifyStdlib(raw []byte) (inMsg, string, kind, error) {
	var m inMsg
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, "", 0, err
	}
	if m.Method == nil {
		return m, "", kindResponse, nil
	}
	var method string
	if json.Unmarshal(m.Method, &method) != nil || method == "" {
		return m, "", kindBadRequest, nil
	}
	if m.hasID() {
		return m, method, kindRequest, nil
	}
	return m, method, kindNotification, nil
}

var classifySeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}`,
	`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"zest-1","progress":1.5e3,"total":-2}}`,
	`{"id":null,"method":"x"}`, `{"id":2,"Method":null}`, `{"ID":3,"RESULT":[1,2,{"a":[]}]}`,
	`{"paramſ":{},"reſult":1,"\u0069d":7,"met\u0068od":"a\u00e9\n"}`, `{"method":"\ud800"}`, `{"method":"caf\xe9"}`,
	`{"id":1,"id":2,"Id":3}`, `{"result":1}x`, `{"result":1} `, ` {"a":1,} `, `{"a" 1}`, `{"a":01}`, `{"a":1.}`,
	`{"a":-}`, `{"a":1e}`, `{"a":1E+2}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{"a":"\u12g4"}`, `{"a":tru}`, `{"a":nul}`,
	`{"a":[1,]}`, `{"a":[,1]}`, `{"a":{"b":1,}}`, `{"a":{"b"}}`, `{"a":[}`, `{"a":{]}`, `{"a":[]]}`, `{`, `}`, `{"a`,
	`null`, `nul`, `null x`, `[]`, `1`, `"s"`, `true`, ``, ` `, `{}`, `{ }`, "{\t\"id\"\r\n:\n1}",
	`{"method":""}`, `{"method":"ok","id":false}`, `{"method":1}`, `{"params":[` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `]}`,
	`{"a":` + strings.Repeat("[", maxNestingDepth-1) + strings.Repeat("]", maxNestingDepth-1) + `}`,
	`{"a":` + strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, maxNestingDepth-1) + `1` + strings.Repeat("}", maxNestingDepth-1) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, maxNestingDepth) + `1` + strings.Repeat("}", maxNestingDepth) + `}`,
}

// FuzzClassify: the one-pass classify answers every line as encoding/json did — the same
// failures, kinds, methods and members.
func FuzzClassify(f *testing.F) {
	for _, s := range classifySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		wm, wmethod, wk, werr := classifyStdlib(raw)
		in := bytes.Clone(raw)
		m, method, k, err := classify(in)
		if (err != nil) != (werr != nil) {
			t.Fatalf("classify(%q) = %v, encoding/json %v", truncate(raw, 200), err, werr)
		}
		if err != nil {
			return
		}
		clear(in) // the members are a copy, not the caller's bytes
		if k != wk || method != wmethod {
			t.Fatalf("classify(%q) = %v %q, encoding/json %v %q", truncate(raw, 200), k, method, wk, wmethod)
		}
		for _, p := range [][2]json.RawMessage{{m.ID, wm.ID}, {m.Method, wm.Method}, {m.Params, wm.Params}, {m.Result, wm.Result}, {m.Error, wm.Error}} {
			if (p[0] == nil) != (p[1] == nil) || !bytes.Equal(p[0], p[1]) {
				t.Fatalf("classify(%q) = %+v, encoding/json %+v", truncate(raw, 200), m, wm)
			}
		}
	})
}

// TestClassifyAsEncodingJSON runs FuzzClassify's seeds, each named.
func TestClassifyAsEncodingJSON(t *testing.T) {
	for i, s := range classifySeeds {
		_, _, wk, werr := classifyStdlib([]byte(s))
		_, _, k, err := classify([]byte(s))
		if (err != nil) != (werr != nil) || err == nil && k != wk {
			t.Errorf("%d: classify(%.80q) = %v, %v; encoding/json %v, %v", i, s, k, err, wk, werr)
		}
	}
}

// BenchmarkClassify: one answer of a tool call from the child (~1 KB, then ~64 KB of result),
// decoded by encoding/json as before and in one pass.
func BenchmarkClassify(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		text := strings.Repeat("a tool's answer, with \\\"quotes\\\" and numbers 12.5e3; ", size/55)
		line := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"` + text + `"}],"isError":false}}`)
		for _, impl := range []struct {
			name string
			fn   func([]byte) (inMsg, string, kind, error)
		}{{"encoding_json", classifyStdlib}, {"one_pass", classify}} {
			b.Run(fmt.Sprintf("%s/%dKiB", impl.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(line)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, k, err := impl.fn(line); err != nil || k != kindResponse {
						b.Fatal(k, err)
					}
				}
			})
		}
	}
}

// TestClassifyCopiesOnce: an answer is read with one allocation, the copy its members share
// (encoding/json made 9: one per member kept, and its decoder's).
func TestClassifyCopiesOnce(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}`)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, k, err := classify(line); err != nil || k != kindResponse {
			t.Fatal(k, err)
		}
	}); n != 1 {
		t.Errorf("classify allocates %v times, want 1", n)
	}
}

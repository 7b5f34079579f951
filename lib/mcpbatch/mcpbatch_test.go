package mcpbatch

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCount(t *testing.T) {
	for body, want := range map[string]int{
		`[]`: 0, ` [ ] `: 0, `[1]`: 1, "\n\t[{\"a\":[1,2,{\"b\":\"],[\"}]},\"x\\\"]\",null , true]": 4,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`: 2,
		`[[],[[]],{}]`: 3, `["\\",","]`: 2,
	} {
		if n, batch := Count([]byte(body)); !batch || n != want {
			t.Errorf("Count(%s) = %d, %v; want %d, true", body, n, batch, want)
		}
	}
	for _, body := range []string{``, `   `, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `"[1,2]"`, `null`} {
		if n, batch := Count([]byte(body)); batch || n != 0 {
			t.Errorf("Count(%s) = %d, %v; want no batch", body, n, batch)
		}
	}
	big := "[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 5000) + `{"jsonrpc":"2.0","id":1,"method":"ping"}]`
	if n, _ := Count([]byte(big)); n != 5001 {
		t.Errorf("a batch of 5001: %d", n)
	}
	if !strings.Contains(TooLong(51), "at most 50 messages") || !strings.Contains(TooLong(51), "holds 51") {
		t.Errorf("TooLong(51) = %q", TooLong(51))
	}
}

// FuzzCount: for every body that is a valid JSON array, Count agrees with encoding/json.
func FuzzCount(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a",{"b":[1,2]}]`, `["\"",","]`, `[ {"x":"]"} , [ ] ]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var items []json.RawMessage
		if json.Unmarshal([]byte(s), &items) != nil || items == nil {
			return
		}
		if n, batch := Count([]byte(s)); !batch || n != len(items) {
			t.Fatalf("Count(%q) = %d, %v; encoding/json finds %d", s, n, batch, len(items))
		}
	})
}

func BenchmarkCount(b *testing.B) {
	body := []byte("[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello \"world\""}}},`, 49) + `{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Count(body)
	}
}

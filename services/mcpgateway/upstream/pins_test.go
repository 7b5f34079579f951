package upstream

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
)

// hideB serves every tool but "b", and records how it was asked.
type hideB struct {
	mu       sync.Mutex
	complete []bool
}

func (h *hideB) Admit(_ context.Context, _ string, tools []json.RawMessage, complete bool) []json.RawMessage {
	h.mu.Lock()
	h.complete = append(h.complete, complete)
	h.mu.Unlock()
	var out []json.RawMessage
	for _, raw := range tools {
		var t struct{ Name string }
		if json.Unmarshal(raw, &t) == nil && t.Name != "b" {
			out = append(out, raw)
		}
	}
	return out
}

// The pins decide what every list of the manager serves: the complete lists it keeps (from
// the connect's listing on) and the tools/list pages it forwards; a Relist tells the
// server's clients.
func TestPinToolsOnEveryList(t *testing.T) {
	f, th := newFakeHost(t)
	m := New(th, nil, nil)
	h := &hideB{}
	m.PinTools(h)
	var notes []string
	m.OnNotification(func(id string, msg []byte) { notes = append(notes, id+" "+string(msg)) })
	cfg := stdioConfig("fx")
	f.setTools("fx", tools("a", "b", "c"))
	if err := m.Connect(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	listed, _, ok := m.Listed("fx")
	if got := names(listed); !ok || !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("Listed = %v, want a and c", got)
	}
	if got, err := m.ListTools(t.Context(), cfg, true); err != nil || !slices.Equal(names(got), []string{"a", "c"}) {
		t.Fatalf("ListTools = %v, %v", names(got), err)
	}
	page, err := m.admitPage(t.Context(), cfg, "tools/list", json.RawMessage(`{"tools":[{"name":"b"},{"name":"a"}],"nextCursor":"2"}`), nil)
	if err != nil || string(page) != `{"nextCursor":"2","tools":[{"name":"a"}]}` {
		t.Fatalf("a forwarded page = %s, %v", page, err)
	}
	if other, _ := m.admitPage(t.Context(), cfg, "prompts/list", json.RawMessage(`{"prompts":[{"name":"b"}]}`), nil); string(other) != `{"prompts":[{"name":"b"}]}` {
		t.Fatalf("another list was changed: %s", other)
	}
	h.mu.Lock()
	if !slices.Equal(h.complete, []bool{true, true, false}) {
		t.Errorf("Admit asked with complete %v, want the two listings then the page", h.complete)
	}
	h.mu.Unlock()
	m.Relist(t.Context(), "fx")
	if len(notes) != 1 || notes[0] != `fx {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
		t.Fatalf("notifications after Relist = %v", notes)
	}
}

func names(raws []json.RawMessage) []string {
	var out []string
	for _, raw := range raws {
		var t struct{ Name string }
		_ = json.Unmarshal(raw, &t)
		out = append(out, t.Name)
	}
	return out
}

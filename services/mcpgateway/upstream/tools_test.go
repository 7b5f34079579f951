package upstream

import (
	"encoding/json"
	"testing"
)

// Each list kept gets a version of its own (the catalog's sign of a change); a listing
// overtaken by a later one keeps nothing and changes no version.
func TestToolCacheVersions(t *testing.T) {
	var a, b toolCache
	if _, _, listed := a.listing(); listed {
		t.Fatal("an empty cache is listed")
	}
	older, newer := a.begin(), a.begin()
	a.put(newer, []json.RawMessage{json.RawMessage(`{"name":"new"}`)})
	_, v1, listed := a.listing()
	if !listed || v1 == 0 {
		t.Fatalf("after a put: version %d, listed %v", v1, listed)
	}
	a.put(older, []json.RawMessage{json.RawMessage(`{"name":"old"}`)})
	if tools, v, _ := a.listing(); v != v1 || string(tools[0]) != `{"name":"new"}` {
		t.Fatalf("an overtaken listing changed the cache: version %d, tools %s", v, tools)
	}
	b.put(b.begin(), nil)
	_, vb, _ := b.listing()
	a.put(a.begin(), []json.RawMessage{json.RawMessage(`{"name":"new"}`)})
	_, v2, _ := a.listing()
	if vb == v1 || v2 == v1 || v2 == vb {
		t.Fatalf("versions %d, %d, %d are not distinct", v1, vb, v2)
	}
}

package searcheval

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zestmcp/zest/services/mcpgateway/toolsearch"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testCatalog = `{"tools":[
 {"server":"fs","name":"read_file","description":"Read a file's contents","inputSchema":{"type":"object","properties":{"path":{"description":"where the file is"},"encoding":{}}}},
 {"server":"fs","name":"write_file","description":"Write content to a file","inputSchema":{"type":"object"}},
 {"server":"gh","name":"create_issue","description":"Open an issue in a repository","inputSchema":{"type":"object"}},
 {"server":"gh","name":"read_issue","description":"Read an issue of a repository","inputSchema":{"type":"object"}}
]}`

func TestDocsCarryArgumentsInNameOrder(t *testing.T) {
	c, err := LoadCatalog(write(t, "c.json", testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	d := Docs(c)[0]
	if d.Key != "fs/read_file" || d.Server != "fs" || !slices.Equal(d.Params, []toolsearch.Param{{Name: "encoding"}, {Name: "path", Description: "where the file is"}}) {
		t.Fatalf("doc %+v", d)
	}
}

func TestLoadRefusesWhatItCannotMeasure(t *testing.T) {
	if _, err := LoadCatalog(write(t, "c.json", `{"tools":[{"server":"a","name":"x"},{"server":"a","name":"x"}]}`)); err == nil || !strings.Contains(err.Error(), "a/x appears twice") {
		t.Fatalf("a tool twice: %v", err)
	}
	c, err := LoadCatalog(write(t, "c.json", testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadQueries(write(t, "q.json", `[{"query":"x","expect":["fs/delete_file"]}]`), c); err == nil || !strings.Contains(err.Error(), "fs/delete_file") {
		t.Fatalf("unknown tool: %v", err)
	}
	if _, err := LoadQueries(write(t, "q.json", `[{"query":"x","expect":["fs/read_file"],"server":"nope"}]`), c); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown server: %v", err)
	}
	if _, err := LoadQueries(write(t, "q.json", `[{"query":"x","expect":[]}]`), c); err == nil {
		t.Fatal("a query with no expected tool was accepted")
	}
}

func TestEvaluateCountsRanksAndFilters(t *testing.T) {
	c, err := LoadCatalog(write(t, "c.json", testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	ix := toolsearch.Build(Docs(c))
	qs := []Query{
		{Query: "read a file", Expect: []string{"fs/read_file"}},                       // first
		{Query: "read an issue", Expect: []string{"gh/create_issue"}},                  // found, not first
		{Query: "read", Expect: []string{"gh/read_issue"}, Server: "gh"},               // held out; first only with the filter
		{Query: "delete everything", Expect: []string{"fs/write_file"}},                // missed
		{Query: "write content", Expect: []string{"gh/create_issue", "fs/write_file"}}, // either
	}
	r := Evaluate(ix, qs)
	if r.All != (Recall{Queries: 5, At1: 3, At5: 4}) {
		t.Errorf("all: %+v", r.All)
	}
	if r.HeldOut != (Recall{Queries: 1, At1: 1, At5: 1}) || r.Tuning != (Recall{Queries: 4, At1: 2, At5: 3}) {
		t.Errorf("held out %+v, tuning %+v", r.HeldOut, r.Tuning)
	}
	if len(r.Misses) != 1 || r.Misses[0].Query.Query != "delete everything" {
		t.Errorf("misses %+v", r.Misses)
	}
	if r.All.R5() != 0.8 || r.All.R1() != 0.6 {
		t.Errorf("fractions %v %v", r.All.R1(), r.All.R5())
	}
}

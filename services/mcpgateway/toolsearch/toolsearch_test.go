package toolsearch

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTermsSplitAndStem(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"read_file", []string{"read", "fil"}},
		{"readFiles", []string{"read", "fil", "readfil"}},
		{"HTTPServer listing", []string{"http", "server", "httpserver", "list"}},
		{"Run JavaScript on GitHub", []string{"run", "java", "script", "javascript", "git", "hub", "github"}},
		{"javascript github", []string{"javascript", "github"}},
		{"Create the issues", []string{"creat", "issu"}},
		{"created, creating; creates", []string{"creat", "creat", "creat"}},
		{"get-env", []string{"get", "env"}},
		{"queries and query", []string{"query", "query"}},
		{"running processes", []string{"run", "process"}},
		{"", nil},
		{"the of to", nil},
	} {
		if got := Terms(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func sampleDocs() []Doc {
	return []Doc{
		{Key: "mcp_fs__read_file", Server: "fs", Name: "read_file", Description: "Read the complete contents of a file from the file system.",
			Params: []Param{{"path", "Path of the file"}}},
		{Key: "mcp_fs__write_file", Server: "fs", Name: "write_file", Description: "Create a new file or overwrite an existing file with new content.",
			Params: []Param{{"path", ""}, {"content", ""}}},
		{Key: "mcp_fs__list_directory", Server: "fs", Name: "list_directory", Description: "Get a detailed listing of all files and directories in a specified path."},
		{Key: "mcp_gh__create_issue", Server: "gh", Name: "create_issue", Description: "Create a new issue in a GitHub repository.",
			Params: []Param{{"owner", "Repository owner"}, {"repo", "Repository name"}, {"title", "Issue title"}}},
		{Key: "mcp_gh__list_issues", Server: "gh", Name: "list_issues", Description: "List issues in a GitHub repository with filtering options."},
		{Key: "mcp_mem__create_entities", Server: "mem", Name: "create_entities", Description: "Create multiple new entities in the knowledge graph."},
		{Key: "mcp_time__get_current_time", Server: "time", Name: "get_current_time", Description: "Get current time in a specific timezone.",
			Params: []Param{{"timezone", "IANA timezone name"}}},
	}
}

func keys(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Doc.Key)
	}
	return out
}

func TestSearchRanksTheToolThatFits(t *testing.T) {
	ix := Build(sampleDocs())
	for _, c := range []struct{ query, want string }{
		{"read a file", "mcp_fs__read_file"},
		{"what files are in this folder directory", "mcp_fs__list_directory"},
		{"open a new GitHub issue", "mcp_gh__create_issue"},
		{"list the open issues of my repository", "mcp_gh__list_issues"},
		{"what time is it in Tokyo timezone", "mcp_time__get_current_time"},
		{"save content to a file", "mcp_fs__write_file"},
	} {
		hits := ix.Search(c.query, Options{Limit: 3})
		if len(hits) == 0 || hits[0].Doc.Key != c.want {
			t.Errorf("%q: got %v, want %s first", c.query, keys(hits), c.want)
		}
	}
}

func TestSearchLimitsFiltersAndOrders(t *testing.T) {
	ix := Build(sampleDocs())
	if hits := ix.Search("create", Options{Limit: 1}); len(hits) != 1 {
		t.Fatalf("limit 1: %v", keys(hits))
	}
	hits := ix.Search("create", Options{Limit: 10, Allow: func(d *Doc) bool { return d.Server == "gh" }})
	if got := keys(hits); !slices.Equal(got, []string{"mcp_gh__create_issue"}) {
		t.Fatalf("server filter: %v", got)
	}
	if hits := ix.Search("nothing matches zebra", Options{Limit: 5}); len(hits) != 0 {
		t.Fatalf("no shared term: %v", keys(hits))
	}
	// Equal scores are ordered by key, so an answer is the same every time.
	ix = Build([]Doc{{Key: "b", Name: "same"}, {Key: "a", Name: "same"}})
	if got := keys(ix.Search("same", Options{Limit: 5})); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ties: %v", got)
	}
	// A query over the bound is cut, not refused.
	if hits := Build(sampleDocs()).Search(strings.Repeat("file ", MaxQueryBytes), Options{Limit: 2}); len(hits) != 2 {
		t.Fatalf("a long query: %v", keys(hits))
	}
}

func TestEmptyIndex(t *testing.T) {
	if hits := Build(nil).Search("anything", Options{}); len(hits) != 0 {
		t.Fatal(hits)
	}
}

func FuzzTerms(f *testing.F) {
	for _, s := range []string{"readFile", "HTTPServer", "ÄpfelÖl", "a_b-c.d", "ies", "ssss", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, term := range Terms(s) {
			if term == "" || stopWords[term] || strings.ToLower(term) != term || (utf8.ValidString(s) && !utf8.ValidString(term)) {
				t.Fatalf("Terms(%q) gave %q", s, term)
			}
		}
		Build([]Doc{{Key: "k", Name: s, Description: s}}).Search(s, Options{Limit: 3})
	})
}

func TestServerNameIsSearched(t *testing.T) {
	ix := Build([]Doc{
		{Key: "a_search", Server: "slack", Name: "search", Description: "Search by title."},
		{Key: "b_search", Server: "notion", Name: "search", Description: "Search by title."},
	})
	if got := keys(ix.Search("search notion", Options{Limit: 2})); len(got) == 0 || got[0] != "b_search" {
		t.Fatalf("the server's name did not count: %v", got)
	}
}

func TestSynonymsReachTheToolsWords(t *testing.T) {
	ix := Build([]Doc{
		{Key: "create_directory", Server: "fs", Name: "create_directory", Description: "Create a new directory."},
		{Key: "read_file", Server: "fs", Name: "read_file", Description: "Read a file."},
		{Key: "remove_item", Server: "x", Name: "remove_item", Description: "Remove an item."},
		{Key: "delete_item", Server: "x", Name: "delete_item", Description: "Delete an item."},
	})
	if got := keys(ix.Search("make a folder", Options{Limit: 2})); len(got) == 0 || got[0] != "create_directory" {
		t.Errorf("make a folder: %v", got)
	}
	// A synonym finds a tool, below the tool that has the query's own word.
	if got := keys(ix.Search("delete", Options{Limit: 3})); !slices.Equal(got, []string{"delete_item", "remove_item"}) {
		t.Errorf("delete: %v", got)
	}
	for t1, group := range synonymGroups {
		for _, w := range group {
			if len(Terms(w)) != 1 {
				t.Errorf("synonym group %d: %q is no single term (%q)", t1, w, Terms(w))
			}
		}
	}
}

func TestLeadSentenceWeighsMore(t *testing.T) {
	ix := Build([]Doc{
		{Key: "a", Name: "one", Description: "Shows the weather. Notes: never pass a city code."},
		{Key: "b", Name: "two", Description: "Finds a city code. Notes: never pass the weather."},
	})
	if got := keys(ix.Search("weather", Options{Limit: 2})); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("weather: %v", got)
	}
	if got := keys(ix.Search("city code", Options{Limit: 2})); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("city code: %v", got)
	}
	if lead, rest := leadSentence("One. Two.\nThree"); lead != "One." || rest != " Two.\nThree" {
		t.Errorf("leadSentence: %q %q", lead, rest)
	}
	if lead, rest := leadSentence("v1.2 is out"); lead != "v1.2 is out" || rest != "" {
		t.Errorf("leadSentence without an end: %q %q", lead, rest)
	}
}

// TestCamelCaseWordMeetsTheWordTyped: a camelCase word of a tool's text (JavaScript) is
// found by the word a person types (javascript), not only by its parts. Before, "javascript"
// met nothing in "Evaluate JavaScript in the page", and a tool that merely had "page" won.
func TestCamelCaseWordMeetsTheWordTyped(t *testing.T) {
	ix := Build([]Doc{
		{Key: "evaluate", Name: "evaluate_script", Description: "Evaluate JavaScript in the page."},
		{Key: "new_page", Name: "new_page", Description: "Open a new page."},
	})
	if got := keys(ix.Search("run some javascript in the page", Options{Limit: 1})); !slices.Equal(got, []string{"evaluate"}) {
		t.Fatalf("first hit %v, want evaluate", got)
	}
}

// TestEmbedTextIsBounded: a description without a full stop is not one endless sentence for
// the embedding model, and the cut keeps whole characters.
func TestEmbedTextIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxEmbedTextBytes) // two bytes each
	got := EmbedText(&Doc{Name: "read_file", Title: "Read", Description: long})
	if len(got) > MaxEmbedTextBytes || !utf8.ValidString(got) || !strings.HasPrefix(got, "read file. Read. é") {
		t.Fatalf("EmbedText: %d bytes, valid %v, starts %q", len(got), utf8.ValidString(got), got[:min(len(got), 20)])
	}
	if got := EmbedText(&Doc{Name: "getEnv", Description: "Print the environment. Values are secret."}); got != "get env. Print the environment." {
		t.Fatalf("EmbedText = %q", got)
	}
}

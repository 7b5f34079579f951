package stdio

import (
	"strings"
	"testing"
)

func TestStderrSummary(t *testing.T) {
	cases := []struct{ name, stderr, want string }{
		{"node missing module", `node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module '/nonexistent.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2
`, "Error: Cannot find module '/nonexistent.js'"},
		{"node throw in user code", `/srv/server.js:3
throw new Error("no API key")
^

Error: no API key
    at Object.<anonymous> (/srv/server.js:3:7)

Node.js v22.1.0`, "Error: no API key"},
		{"node syntax error", "/srv/x.js:1\nfunction (\n         ^\n\nSyntaxError: Function statements require a function name\n    at wrapSafe (node:internal/modules/cjs/loader:1281:20)\n\nNode.js v20.20.2\n",
			"SyntaxError: Function statements require a function name"},
		{"python traceback", `Traceback (most recent call last):
  File "/srv/server.py", line 3, in <module>
    raise RuntimeError("boom")
RuntimeError: boom
`, "RuntimeError: boom"},
		{"python exception without Error in its name", "Traceback (most recent call last):\n  File \"/x.py\", line 1, in <module>\n    main()\nmyapp.Boom: the config is gone\n", "myapp.Boom: the config is gone"},
		{"go panic", "panic: runtime error: index out of range [3] with length 1\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:9 +0x1d\nexit status 2\n",
			"panic: runtime error: index out of range [3] with length 1"},
		{"npm", "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/@nope%2fnope - Not found\nnpm error 404\nnpm error 404  '@nope/nope@*' is not in this registry.\nnpm error A complete log of this run can be found in: /root/.npm/_logs/x.log\n",
			"npm error code E404 | npm error 404 Not Found - GET https://registry.npmjs.org/@nope%2fnope - Not found | npm error 404"},
		{"no error-like line: the last lines", "starting\nloading config\nbye now\nshutting down\n", "loading config | bye now | shutting down"},
		{"repeated lines once", "error: retrying\nerror: retrying\nerror: retrying\n", "error: retrying"},
		{"crlf and blanks", "\r\n\r\nfatal: not a git repository\r\n\r\n", "fatal: not a git repository"},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := stderrSummary(tc.stderr); got != tc.want {
				t.Fatalf("summary = %q, want %q", got, tc.want)
			}
		})
	}
	long := strings.Repeat("Error: é", 200)
	if got := stderrSummary(long); len(got) > summaryBytes+len("…") || !strings.HasSuffix(got, "…") {
		t.Fatalf("long line: %d bytes %q", len(got), got[len(got)-10:])
	}
}

// TestTruncate: a cut never splits a rune, for strings and for a child's line as bytes.
func TestTruncate(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"ab€cd", 3, "ab…"}, // € is 3 bytes: cutting at 3 or 4 would split it
		{"ab€cd", 4, "ab…"},
		{"ab€cd", 5, "ab€…"},
		{"€", 1, "…"},
	}
	for _, tc := range cases {
		if got := truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if got := truncate([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("truncate([]byte(%q), %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

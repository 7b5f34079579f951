package stdio

import (
	"regexp"
	"strings"
)

// Limits of the stderr summary put in an exit error.
const (
	summaryLines = 3
	summaryBytes = 500
)

var (
	// Lines that never explain a failure: Node's version trailer, stack frames (JavaScript's
	// "    at f (file:1:2)", Python's `  File "x.py", line 1, in f`, Go's "goroutine 1
	// [running]:"), and npm's pointer to its log file.
	noiseLine = regexp.MustCompile(`^(Node\.js v\d+|\s+at\s|\s*File ".*", line \d+|goroutine \d+ \[|npm (error|ERR!) A complete log of this run)`)
	// A code frame's location line, as Node prints it above the source line: "/x.js:1" or
	// "node:internal/modules/cjs/loader:1228".
	frameLocation = regexp.MustCompile(`^\S+:\d+$`)
	// Lines that look like the reason a program failed.
	errorLine = regexp.MustCompile(`(?i)(error|cannot|can't|not found|no such|enoent|eacces|eaddrinuse|econnrefused|denied|fatal|panic|exception|failed|invalid|missing)`)
)

// stderrSummary picks from a child's stderr the lines that say why it failed: up to 3 lines
// that look like errors (the first ones found), else the last 3 lines, at most 500 bytes,
// joined by " | ". Blank lines, Node's "Node.js vNN" trailer, stack frames, code frames (the
// location, source and ^ lines Node and Python print above an error) and repeated lines are
// skipped, and the last line of a Python traceback counts as an error; so `node missing.js`
// reports "Error: Cannot find module '/missing.js'" rather than "Node.js v20.20.2".
func stderrSummary(stderr string) string {
	lines := strings.Split(strings.ReplaceAll(stderr, "\r\n", "\n"), "\n")
	skip := make([]bool, len(lines))
	for i, l := range lines {
		switch {
		case isCaretLine(l): // the caret points into the source line above, headed by its location
			skip[i] = true
			if i >= 1 {
				skip[i-1] = true
			}
			if i >= 2 && frameLocation.MatchString(strings.TrimSpace(lines[i-2])) {
				skip[i-2] = true
			}
		case pythonFrame(l) && i+1 < len(lines) && indent(lines[i+1]) > indent(l): // its source line
			skip[i+1] = true
		}
	}
	var kept, errs []string
	seen := map[string]bool{}
	traceback := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "Traceback (most recent call last):") {
			traceback = true
			continue
		}
		if t == "" || skip[i] || noiseLine.MatchString(l) {
			continue
		}
		// The first line of a traceback that is not a frame is the exception.
		raised := traceback && indent(l) == 0
		if raised {
			traceback = false
		}
		if seen[t] {
			continue
		}
		seen[t] = true
		kept = append(kept, t)
		if raised || errorLine.MatchString(t) {
			errs = append(errs, t)
		}
	}
	pick := errs
	if len(pick) > summaryLines {
		pick = pick[:summaryLines]
	}
	if len(pick) == 0 {
		pick = kept[max(0, len(kept)-summaryLines):]
	}
	return truncate(strings.Join(pick, " | "), summaryBytes)
}

func pythonFrame(l string) bool {
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, `File "`) && strings.Contains(t, `", line `)
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }

func isCaretLine(l string) bool {
	t := strings.TrimSpace(l)
	return t != "" && strings.Trim(t, "^~") == ""
}

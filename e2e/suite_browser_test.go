package e2e

// The real-browser harness: headless Chromium (Debian's chromium, installed by
// scripts/ensure-apt.sh chromium) driven through chromedp, axe-core (pinned in
// scripts/browser/) for accessibility, full-page screenshots, and keyboard helpers. The web
// console's tests use these helpers; TestBrowserHarness checks the harness itself against
// pages of its own, so a broken harness is told apart from a broken console.

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/zestmcp/zest/lib/testenv"
	"github.com/zestmcp/zest/lib/waitfor"
)

// Limits of the harness. Each is a ceiling: a healthy run stays well under it.
const (
	// browserLifetime bounds a browser's whole life: a hung page cannot hold a test (and its
	// Chromium) until go test's own 10-minute timeout.
	browserLifetime = 3 * time.Minute
	// browserCloseTimeout is how long the graceful Browser.close may take before the process
	// is killed.
	browserCloseTimeout = 5 * time.Second
	// leftoverWait is how long Chromium's child processes (zygote, utility) get to exit after
	// the main process has; the harness then kills the rest and fails the test.
	leftoverWait = 5 * time.Second
	// axeTimeout bounds one injection and run of axe-core; a console page takes well under 2 s.
	axeTimeout = 30 * time.Second
	// maxAxeTargets is how many offending elements of one violation are listed.
	maxAxeTargets = 3
	// browserOutputMax is how much of Chromium's stderr is kept for a failed test's log.
	browserOutputMax = 64 << 10
)

// The page's viewport, in CSS pixels at scale 1.
const viewportWidth, viewportHeight = 1280, 900

// browserKey holds a browser's *browserState in its context.
type browserKey struct{}

// browserState is what the helpers and the cleanup need to know about one browser.
type browserState struct {
	userDataDir string

	mu       sync.Mutex
	console  []chromedp.ConsoleMessage // every console message and uncaught exception
	exitedAt time.Time                 // when the cleanup saw the last process go
}

func stateOf(ctx context.Context) *browserState {
	s, _ := ctx.Value(browserKey{}).(*browserState)
	return s
}

// newBrowser starts a headless Chromium with a fresh profile in t.TempDir() and returns the
// context of its first tab. It needs testenv.Chromium (skipped without it, a failure under
// make test's ZEST_REQUIRE_ALL=1; ZEST_CHROMIUM names another binary). The cleanup
// closes the browser, then checks that none of its processes is left, killing and reporting
// any.
//
// An uncaught exception in a page fails the test (a console that throws is broken); console
// errors are logged. Read them all with consoleMessages. Options in extra are added to the
// browser's (a flag such as host-resolver-rules).
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	exe := testenv.Need(t, testenv.Chromium, "it drives pages in a real browser")
	// TempDir first: cleanups run last-in first-out, so the directory goes after the browser.
	dir := t.TempDir()
	st := &browserState{userDataDir: dir}
	out := &tailBuffer{max: browserOutputMax}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless, // also --hide-scrollbars (stable screenshots) and --mute-audio
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(viewportWidth, viewportHeight),
		chromedp.CombinedOutput(out),
	}
	opts = append(opts, extra...)
	base, cancelBase := context.WithTimeout(context.WithValue(context.Background(), browserKey{}, st), browserLifetime)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)

	t.Cleanup(func() {
		closing := time.Now()
		closeCtx, cancelClose := context.WithTimeout(ctx, browserCloseTimeout)
		if err := chromedp.Cancel(closeCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("browser: graceful close: %v (killing it)", err)
		}
		cancelClose()
		cancelTab()
		cancelAlloc() // kills the process if still there and waits for it
		cancelBase()
		if pids := waitBrowserGone(dir, leftoverWait); len(pids) > 0 {
			t.Errorf("browser: %d Chromium processes of %s still ran %s after the browser closed; killed them: %v", len(pids), dir, leftoverWait, pids)
		} else {
			t.Logf("browser: closed in %s, no process left", time.Since(closing).Round(time.Millisecond))
		}
		st.mu.Lock()
		st.exitedAt = time.Now()
		msgs := st.console
		st.mu.Unlock()
		for _, m := range msgs {
			switch {
			case m.IsException():
				t.Errorf("browser: uncaught exception in the page: %s (%s:%d:%d)", m.Text, m.URL, m.Line+1, m.Column+1)
			case m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning:
				t.Logf("browser console %s: %s", m.Type, m.Text)
			}
		}
		if t.Failed() && out.Len() > 0 {
			t.Logf("browser output (last %d bytes at most):\n%s", browserOutputMax, out.String())
		}
	})

	start := time.Now()
	// The first action starts the browser and opens the tab. The window is 1280×900, but new
	// headless keeps room for a simulated toolbar (the page got 1280×757): the viewport itself
	// is set, so layouts and screenshots are the same on every machine.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewportWidth, viewportHeight)); err != nil {
		t.Fatalf("starting %s: %v\n%s", exe, err, out.String())
	}
	// Collect the console from here on; the goroutine ends with the tab's context.
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			st.mu.Lock()
			st.console = append(st.console, m)
			st.mu.Unlock()
		}
	}()
	t.Logf("browser: %s started in %s (profile %s)", exe, time.Since(start).Round(time.Millisecond), dir)
	return ctx
}

// consoleMessages returns the console messages and uncaught exceptions seen so far.
func consoleMessages(ctx context.Context) []chromedp.ConsoleMessage {
	st := stateOf(ctx)
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), st.console...)
}

// browserProcesses returns the pids of the processes started with --user-data-dir=dir.
// Chromium passes that flag to every child, and the directory is unique to one test.
func browserProcesses(dir string) []int {
	want := "--user-data-dir=" + dir
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if arg == want {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitBrowserGone waits up to limit for the processes of dir to exit, then kills those left
// and returns their pids (none: clean exit).
func waitBrowserGone(dir string, limit time.Duration) []int {
	var pids []int
	if _, err := waitfor.Poll(limit, func() error {
		if pids = browserProcesses(dir); len(pids) > 0 {
			return fmt.Errorf("processes %v left", pids)
		}
		return nil
	}); err == nil {
		return nil
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return pids
}

// navigate loads url in the tab and waits for its load event.
func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate to %s: %v", url, err)
	}
}

// axeViolation is one failed axe-core rule, trimmed to what a test log needs.
type axeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	HelpURL string   `json:"helpUrl"`
	Nodes   int      `json:"nodes"`
	Targets []string `json:"targets"` // CSS selectors of the first maxAxeTargets offending elements
}

func (v axeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s — %d element(s), e.g. %s — %s", v.ID, v.Impact, v.Help, v.Nodes, strings.Join(v.Targets, ", "), v.HelpURL)
}

// axeTags are the rule sets checked: WCAG 2.0 and 2.1, levels A and AA, and axe's best
// practices (heading order, landmarks), whose findings are moderate: every finding of any
// impact fails the test.
const axeTags = `['wcag2a','wcag2aa','wcag21a','wcag21aa','best-practice']`

// needAxe returns axe-core's browser build (testenv.BrowserDeps, installed by `make
// browser-deps`).
func needAxe(t *testing.T) string {
	t.Helper()
	return testenv.Need(t, testenv.BrowserDeps, "it checks pages' accessibility with axe-core")
}

// runAxe injects axe-core (axe.min.js at axeJS) into the current page (once) and runs it over
// the whole document. It returns the violations and the number of rules that passed.
func runAxe(ctx context.Context, axeJS string) ([]axeViolation, int, error) {
	ctx, cancel := context.WithTimeout(ctx, axeTimeout)
	defer cancel()
	present, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.axe === 'object' && typeof window.axe.run === 'function'`))
	if err != nil {
		return nil, 0, fmt.Errorf("axe: checking the page: %w", err)
	}
	if !present {
		src, err := os.ReadFile(axeJS)
		if err != nil {
			return nil, 0, fmt.Errorf("axe: %w", err)
		}
		// Runtime.evaluate is not subject to the page's Content-Security-Policy, so a console
		// with a strict CSP can still be checked. The trailing `true` keeps the script's own
		// completion value (axe's module object) from being serialized back.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](string(src)+"\n;true")); err != nil {
			return nil, 0, fmt.Errorf("axe: injecting %s: %w", axeJS, err)
		}
	}
	type result struct {
		Violations []axeViolation `json:"violations"`
		Passes     int            `json:"passes"`
	}
	script := fmt.Sprintf(`axe.run(document, {runOnly: {type: 'tag', values: %s}}).then(r => ({
		passes: r.passes.length,
		violations: r.violations.map(v => ({
			id: v.id, impact: v.impact || '', help: v.help, helpUrl: v.helpUrl, nodes: v.nodes.length,
			targets: v.nodes.slice(0, %d).map(n => n.target.map(s => Array.isArray(s) ? s.join(' >>> ') : String(s)).join(' >> ')),
		})),
	}))`, axeTags, maxAxeTargets)
	r, err := chromedp.Run(ctx, chromedp.Evaluate[result](script, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, 0, fmt.Errorf("axe: running: %w", err)
	}
	return r.Violations, r.Passes, nil
}

// axeCheck fails the test when axe-core finds a violation of any impact (WCAG 2.1 A/AA or a
// best practice) on the current page,
// listing each one; name says which page or state was checked.
func axeCheck(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	violations, passes, err := runAxe(ctx, needAxe(t))
	if err != nil {
		t.Fatalf("axe %s: %v", name, err)
	}
	t.Logf("axe %s: %d rules passed, %d violated", name, passes, len(violations))
	if len(violations) == 0 {
		return
	}
	var b strings.Builder
	for _, v := range violations {
		fmt.Fprintf(&b, "\n  - %s", v)
	}
	t.Errorf("axe %s: %d accessibility violation(s) (WCAG 2.1 A/AA and best practices):%s", name, len(violations), b.String())
}

// screenshotDir is ZEST_SCREENSHOT_DIR, default e2e/out/screenshots/ (git-ignored).
func screenshotDir() string {
	if d := os.Getenv("ZEST_SCREENSHOT_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), "e2e", "out", "screenshots")
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshot writes a full-page PNG of the current page to screenshotDir() as
// <test name>_<name>.png and logs its path.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 = PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := screenshotDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot %s: %v (ZEST_SCREENSHOT_DIR)", name, err)
	}
	path := filepath.Join(dir, unsafeFileChars.ReplaceAllString(t.Name()+"_"+name, "_")+".png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	t.Logf("screenshot %s: %s (%d bytes)", name, path, len(data))
	return path
}

// press sends keys to the focused element, each argument in turn: kb.Tab, kb.Enter,
// kb.Escape, kb.ArrowDown… or text, which is typed character by character.
func press(t *testing.T, ctx context.Context, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(k)); err != nil {
			t.Fatalf("pressing %q: %v", k, err)
		}
	}
}

// pressTab, pressEnter and typeText are press for the common cases.
func pressTab(t *testing.T, ctx context.Context) { t.Helper(); press(t, ctx, kb.Tab) }
func pressEnter(t *testing.T, ctx context.Context) {
	t.Helper()
	press(t, ctx, kb.Enter)
}
func typeText(t *testing.T, ctx context.Context, text string) { t.Helper(); press(t, ctx, text) }

// focused describes document.activeElement, as tag#id.class "text", for logs and errors.
func focused(ctx context.Context) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const e = document.activeElement;
		if (!e || e === document.body) return 'body';
		let d = e.tagName.toLowerCase();
		if (e.id) d += '#' + e.id;
		if (e.classList.length) d += '.' + [...e.classList].join('.');
		const label = (e.getAttribute('aria-label') || e.innerText || e.value || '').trim().slice(0, 40);
		return label ? d + ' "' + label + '"' : d;
	})()`))
}

// tabTo presses Tab until the focused element matches the CSS selector, at most maxTabs
// times, as a keyboard-only user would; it fails listing every element the focus visited.
func tabTo(t *testing.T, ctx context.Context, selector string, maxTabs int) {
	t.Helper()
	matches := fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%s)`, strconv.Quote(selector))
	var visited []string
	for i := 0; i < maxTabs; i++ {
		pressTab(t, ctx)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](matches))
		if err != nil {
			t.Fatalf("tab to %s: %v", selector, err)
		}
		if ok {
			return
		}
		d, _ := focused(ctx)
		visited = append(visited, d)
	}
	t.Fatalf("tab to %s: not focused after %d Tab presses; the focus went through: %s", selector, maxTabs, strings.Join(visited, " → "))
}

// waitText waits until the visible text (innerText) of the first element matching the CSS
// selector contains want. The error tells whether the element never appeared or what text
// it had last.
func waitText(ctx context.Context, selector, want string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	read := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? {found: true, text: e.innerText} : {found: false, text: ''}; })()`, strconv.Quote(selector))
	type state struct {
		Found bool   `json:"found"`
		Text  string `json:"text"`
	}
	var last state
	var lastErr error
	if _, err := waitfor.Poll(timeout, func() error {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[state](read))
		if err == nil {
			last, lastErr = s, nil
			if s.Found && strings.Contains(s.Text, want) {
				return nil
			}
		} else if ctx.Err() == nil {
			lastErr = err // e.g. a navigation replaced the page: try again
		}
		return errNoText
	}); err == nil {
		return nil
	}
	switch {
	case lastErr != nil:
		return fmt.Errorf("element %s: waiting %s for text %q: %w", selector, timeout, want, lastErr)
	case !last.Found:
		return fmt.Errorf("element %s: not on the page after %s (waiting for text %q)", selector, timeout, want)
	default:
		return fmt.Errorf("element %s: text %q after %s does not contain %q", selector, clip(last.Text, 200), timeout, want)
	}
}

// errNoText is waitText's condition not holding yet (its error says why once it gives up).
var errNoText = errors.New("the text is not there yet")

// mustWaitText is waitText failing the test.
func mustWaitText(t *testing.T, ctx context.Context, selector, want string, timeout time.Duration) {
	t.Helper()
	if err := waitText(ctx, selector, want, timeout); err != nil {
		t.Fatal(err)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// tailBuffer keeps the last max bytes written to it (Chromium's output, for failed tests).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append([]byte(nil), w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) Len() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.b) }
func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// The self-test's pages. The good one is small but complete: language, title, landmark,
// heading, a labelled input, a button whose activation updates a live region.
const harnessGoodPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Harness check</title></head>
<body><main>
<h1>Harness check</h1>
<p><a href="#status">Skip to status</a></p>
<label for="name">Name</label> <input id="name" type="text">
<button id="go" type="button">Greet</button>
<p id="status" role="status" aria-live="polite">Idle</p>
</main>
<script src="/app.js"></script>
</body></html>`

// The script is a separate file: the good page is served with a CSP that forbids inline
// scripts and eval, as the console's should be, and axe must still run there.
const harnessScript = `document.getElementById('go').addEventListener('click', () => {
  const n = document.getElementById('name').value || 'nobody';
  document.getElementById('status').textContent = 'Hello, ' + n + '!';
});`

// The bad page: an image without alt text (axe rule image-alt, WCAG 1.1.1) and a page
// without lang (html-has-lang, WCAG 3.1.1).
const harnessBadPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>Harness violation</title></head>
<body><main><h1>Broken</h1>
<img id="noalt" src="/pixel.png" width="10" height="10">
</main></body></html>`

func TestBrowserHarness(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /good", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, harnessGoodPage)
	})
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, harnessScript)
	})
	mux.HandleFunc("GET /bad", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, harnessBadPage)
	})
	// /favicon.ico too: Chromium asks for it, and a 404 would be a console error.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		png.Encode(w, image.NewGray(image.Rect(0, 0, 16, 16)))
	})
	mux.HandleFunc("GET /pixel.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		png.Encode(w, image.NewGray(image.Rect(0, 0, 10, 10)))
	})
	srv := httptest.NewServer(mux) // 127.0.0.1
	defer srv.Close()

	var dir string
	t.Run("browser", func(t *testing.T) {
		ctx := newBrowser(t)
		dir = stateOf(ctx).userDataDir

		step := func(name string, f func()) {
			t.Helper()
			start := time.Now()
			f()
			t.Logf("%s: %s", name, time.Since(start).Round(time.Millisecond))
		}

		step("good page: load", func() {
			navigate(t, ctx, srv.URL+"/good")
			vp, err := chromedp.Run(ctx, chromedp.Evaluate[string](`innerWidth + 'x' + innerHeight`))
			if want := fmt.Sprintf("%dx%d", viewportWidth, viewportHeight); err != nil || vp != want {
				t.Errorf("viewport = %q, %v; want %s", vp, err, want)
			}
		})
		step("good page: axe", func() { axeCheck(t, ctx, "good page") })
		step("good page: axe again (already injected)", func() { axeCheck(t, ctx, "good page again") })
		step("good page: screenshot", func() {
			path := screenshot(t, ctx, "good")
			b, err := os.ReadFile(path)
			if err != nil || !strings.HasPrefix(string(b), "\x89PNG\r\n") {
				t.Errorf("screenshot %s is not a PNG (err %v)", path, err)
			}
		})
		step("good page: keyboard", func() {
			// Focus order: skip link, input, button. Type into the input, tab on to the button,
			// press Enter: the live region must say hello.
			tabTo(t, ctx, "#name", 5)
			typeText(t, ctx, "Ada")
			tabTo(t, ctx, "#go", 3)
			if d, err := focused(ctx); err != nil || !strings.Contains(d, `button#go "Greet"`) {
				t.Errorf("focused = %q, %v; want the Greet button", d, err)
			}
			pressEnter(t, ctx)
			mustWaitText(t, ctx, "#status", "Hello, Ada!", 5*time.Second)
		})
		step("good page: waitText errors", func() {
			err := waitText(ctx, "#status", "never", 200*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), `text "Hello, Ada!" after 200ms does not contain "never"`) {
				t.Errorf("waitText on a wrong text: %v", err)
			}
			err = waitText(ctx, "#missing", "x", 200*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), "element #missing: not on the page after 200ms") {
				t.Errorf("waitText on a missing element: %v", err)
			}
		})

		step("bad page: load and axe", func() {
			navigate(t, ctx, srv.URL+"/bad")
			violations, passes, err := runAxe(ctx, needAxe(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("axe bad page: %d passes, violations: %v", passes, violations)
			found := map[string]axeViolation{}
			for _, v := range violations {
				found[v.ID] = v
			}
			img, ok := found["image-alt"]
			if !ok || img.Impact != "critical" || len(img.Targets) != 1 || img.Targets[0] != "#noalt" {
				t.Errorf("image-alt on the bad page: got %+v (all: %v); want critical on #noalt", img, violations)
			}
			if _, ok := found["html-has-lang"]; !ok {
				t.Errorf("html-has-lang not reported on the bad page: %v", violations)
			}
		})
		if msgs := consoleMessages(ctx); len(msgs) > 0 {
			t.Logf("console: %v", msgs)
		}
	})
	if dir == "" {
		return // skipped
	}
	// The subtest's cleanup closed the browser: nothing of it may be left running.
	if pids := browserProcesses(dir); len(pids) > 0 {
		t.Errorf("Chromium processes left after the browser closed: %v", pids)
	}
}

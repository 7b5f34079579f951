package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// exchange is one HTTP call made from any goroutine (do fails the test, so it may only run
// on the test's own): a body of known length, or chunked when chunked is set.
type exchange struct {
	method, url string
	header      map[string]string
	body        []byte
	chunked     bool
}

type reply struct {
	status int
	body   []byte
}

// client is the test's HTTP client, with enough idle connections for the concurrent calls.
var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 2 * time.Minute}

func (e exchange) send(ctx context.Context) (reply, error) {
	var rd io.Reader = bytes.NewReader(e.body)
	if e.chunked {
		rd = io.MultiReader(rd) // hides the length: sent chunked, so only the edge's reading can stop it
	}
	if e.body == nil {
		rd = nil
	}
	req, err := http.NewRequestWithContext(ctx, e.method, e.url, rd)
	if err != nil {
		return reply{}, err
	}
	for k, v := range e.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, b}, err
}

// mcpExchange is a POST /mcp in session.
func mcpExchange(s *Suite, session string, body []byte) exchange {
	return exchange{method: "POST", url: s.URL + "/mcp", body: body, header: map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Session-Id": session}}
}

// restTranscription is a multipart POST /api/v1/audio/transcriptions of audio.
func restTranscription(t *testing.T, s *Suite, audio []byte) exchange {
	body, ct := multipartAudio(t, audio, map[string]string{"model": "builtin-transcribe", "response_format": "verbose_json"})
	return exchange{method: "POST", url: s.URL + "/api/v1/audio/transcriptions", body: []byte(body), header: map[string]string{"Content-Type": ct}}
}

// transcribeCall is the JSON-RPC body of lemonade_transcribe_audio with audio as base64.
func transcribeCall(audio []byte) []byte {
	var b bytes.Buffer
	b.Grow(base64.StdEncoding.EncodedLen(len(audio)) + 200)
	b.WriteString(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lemonade_transcribe_audio","arguments":{"filename":"big.wav","audio_base64":"`)
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	enc.Write(audio)
	enc.Close()
	b.WriteString(`"}}}`)
	return b.Bytes()
}

// expect checks a reply: the status, and each string in the body.
func expect(r reply, status int, contains ...string) error {
	if r.status != status {
		return fmt.Errorf("status %d, want %d: %.300s", r.status, status, r.body)
	}
	for _, c := range contains {
		if !bytes.Contains(r.body, []byte(c)) {
			return fmt.Errorf("answer lacks %q: %.300s", c, r.body)
		}
	}
	return nil
}

// TestSizeLimits: a 6 MB WAV transcribes over REST and an 8 MB one over /mcp (base64); the
// largest base64 audio the edge's 32 MiB body limit lets through works, one byte more is
// 413; and 300 small calls running beside 12 streams of large and oversized uploads all get
// their answers (under the default limits per key, which leave a loopback caller alone).
func TestSizeLimits(t *testing.T) {
	s := startSuite(t)
	session, _ := mcpInit(t, s, "2025-11-25")
	const limit = 32 << 20 // ZEST_MAX_BODY_BYTES's default
	wav6, wav8 := toneWAVSized(6_000_000-44), toneWAVSized(8_000_000-44)
	rest6, mcp8 := restTranscription(t, s, wav6), mcpExchange(s, session, transcribeCall(wav8))
	if len(wav6) != 6_000_000 || len(wav8) != 8_000_000 {
		t.Fatalf("WAVs of %d and %d bytes", len(wav6), len(wav8))
	}

	t.Run("6 MB WAV over REST", func(t *testing.T) {
		r, err := rest6.send(t.Context())
		if err == nil {
			err = expect(r, 200, `"task":"transcribe"`, "187.50 s of 16000 Hz mono 16-bit PCM")
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("8 MB WAV over /mcp", func(t *testing.T) {
		r, err := mcp8.send(t.Context())
		if err == nil {
			err = expect(r, 200, "250.00 s of 16000 Hz mono 16-bit PCM")
		}
		if err == nil && bytes.Contains(r.body, []byte(`"isError":true`)) {
			err = fmt.Errorf("tool error: %s", r.body)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the largest base64 audio the body limit lets through", func(t *testing.T) {
		envelope := len(transcribeCall(nil))
		n := (limit-envelope)/4*3 - 1 // its base64 fits the body exactly; -1: whole frames (even)
		audio := toneWAVSized(n - 44)
		body := transcribeCall(audio)
		if len(body) > limit || len(body) < limit-8 {
			t.Fatalf("body of %d bytes for %d bytes of audio", len(body), len(audio))
		}
		r, err := mcpExchange(s, session, body).send(t.Context())
		if err == nil {
			err = expect(r, 200, fmt.Sprintf("%.2f s of 16000 Hz", float64(n-44)/32000))
		}
		if err != nil {
			t.Fatalf("%d bytes of audio (%.2f MiB) in a %d-byte body: %v", len(audio), float64(len(audio))/(1<<20), len(body), err)
		}
		t.Logf("%d bytes of audio (%.2f MiB) in a %d-byte body: transcribed", len(audio), float64(len(audio))/(1<<20), len(body))
		over := append(bytes.Repeat([]byte(" "), limit+1-len(body)), body...) // the same call, one byte over the limit
		r, err = mcpExchange(s, session, over).send(t.Context())
		if err == nil {
			err = expect(r, 413, `"code":-32600`, "Request body too large: the limit is 32 MiB")
		}
		if err != nil {
			t.Fatalf("%d-byte body: %v", len(over), err)
		}
	})

	// 12 upload streams, each repeating its upload until the small calls are done: 4 REST and
	// 2 /mcp transcriptions within the limit, 6 bodies over it (declared or chunked).
	overAudio := make([]byte, limit+1<<20)
	restOver := restTranscription(t, s, overAudio)
	restOverChunked := restOver
	restOverChunked.chunked = true
	mcpOver := mcpExchange(s, session, transcribeCall(overAudio[:limit]))
	mcpOverChunked := mcpOver
	mcpOverChunked.chunked = true
	type upload struct {
		name  string
		ex    exchange
		check func(reply) error
	}
	ok6 := func(r reply) error { return expect(r, 200, "187.50 s of 16000 Hz") }
	ok8 := func(r reply) error { return expect(r, 200, "250.00 s of 16000 Hz") }
	restTooLarge := func(r reply) error {
		return expect(r, 413, `"type":"invalid_request_error"`, "Request body too large: the limit is 32 MiB")
	}
	mcpTooLarge := func(r reply) error {
		return expect(r, 413, `"code":-32600`, "Request body too large: the limit is 32 MiB")
	}
	uploads := []upload{
		{"REST 6 MB #1", rest6, ok6}, {"REST 6 MB #2", rest6, ok6}, {"REST 6 MB #3", rest6, ok6}, {"REST 6 MB #4", rest6, ok6},
		{"/mcp 8 MB #1", mcp8, ok8}, {"/mcp 8 MB #2", mcp8, ok8},
		{"REST 33 MiB declared #1", restOver, restTooLarge}, {"REST 33 MiB declared #2", restOver, restTooLarge}, {"REST 33 MiB chunked", restOverChunked, restTooLarge},
		{"/mcp 43 MiB declared #1", mcpOver, mcpTooLarge}, {"/mcp 43 MiB declared #2", mcpOver, mcpTooLarge}, {"/mcp 43 MiB chunked", mcpOverChunked, mcpTooLarge},
	}
	small := []struct {
		ex    exchange
		check func(reply) error
	}{
		{exchange{method: "GET", url: s.URL + "/api/v1/models"}, func(r reply) error { return expect(r, 200, `"id":"builtin-llm"`, `"id":"builtin-transcribe"`) }},
		{mcpExchange(s, session, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)), func(r reply) error {
			return expect(r, 200, `"name":"lemonade_chat"`, `"name":"lemonade_transcribe_audio"`, `"name":"lemonade_omni"`)
		}},
	}

	ctx := t.Context()
	var (
		smallDone     atomic.Bool
		inFlight      atomic.Int32
		mu            sync.Mutex
		failures      []string
		largeDone     = map[string]int{}
		overlapped    atomic.Int32
		largeWG       sync.WaitGroup
		smallWG       sync.WaitGroup
		smallLatency  = make([]time.Duration, 300)
		started       = make(chan struct{}, len(uploads))
		firstUploadAt time.Time
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, a...))
	}
	begin := time.Now()
	for _, u := range uploads {
		largeWG.Add(1)
		go func() {
			defer largeWG.Done()
			for i := 0; i == 0 || !smallDone.Load(); i++ {
				inFlight.Add(1)
				if i == 0 {
					started <- struct{}{}
				}
				r, err := u.ex.send(ctx)
				inFlight.Add(-1)
				if err == nil {
					err = u.check(r)
				}
				if err != nil {
					fail("%s (upload %d): %v", u.name, i+1, err)
					return
				}
				mu.Lock()
				largeDone[u.name]++
				mu.Unlock()
			}
		}()
	}
	for range uploads {
		<-started
	}
	firstUploadAt = time.Now()
	calls := make(chan int)
	for range 24 {
		smallWG.Add(1)
		go func() {
			defer smallWG.Done()
			for i := range calls {
				c := small[i%2]
				t0 := time.Now()
				busy := inFlight.Load() > 0
				r, err := c.ex.send(ctx)
				if err == nil {
					err = c.check(r)
				}
				smallLatency[i] = time.Since(t0)
				if err != nil {
					fail("small call %d (%s %s): %v", i, c.ex.method, c.ex.url, err)
				}
				if busy && inFlight.Load() > 0 {
					overlapped.Add(1)
				}
			}
		}()
	}
	for i := range 300 {
		calls <- i
	}
	close(calls)
	smallWG.Wait()
	smallTime := time.Since(firstUploadAt)
	smallDone.Store(true)
	largeWG.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	var worst time.Duration
	for _, d := range smallLatency {
		worst = max(worst, d)
	}
	t.Logf("300 small calls in %v (slowest %v), %d of them while uploads were in flight; uploads finished: %v; all done in %v",
		smallTime.Round(time.Millisecond), worst.Round(time.Millisecond), overlapped.Load(), largeDone, time.Since(begin).Round(time.Millisecond))
	if overlapped.Load() < 150 {
		t.Errorf("only %d of 300 small calls ran beside an upload: the test did not test what it says", overlapped.Load())
	}
	for _, name := range []string{"zest-gateway", "zest-mcpgateway", "zest-inference"} {
		t.Logf("%s peak RSS %d MiB", name, peakRSS(t, s, name))
		if !s.procs[name].running() {
			t.Errorf("%s exited:\n%s", name, s.Logs(name))
		}
	}
}

// TestAudioBase64LimitIs25MiB: lemonade_transcribe_audio takes exactly 25 MiB of audio as
// base64 and refuses more, naming the limit (the edge's body limit raised to 36 MiB so that
// 25 MiB of base64 reaches it).
func TestAudioBase64LimitIs25MiB(t *testing.T) {
	s := startSuite(t, "ZEST_MAX_BODY_BYTES="+strconv.Itoa(36<<20))
	session, _ := mcpInit(t, s, "2025-11-25")
	at := toneWAVSized(25<<20 - 44)
	r, err := mcpExchange(s, session, transcribeCall(at)).send(t.Context())
	if err == nil {
		err = expect(r, 200, "819.20 s of 16000 Hz")
	}
	if err != nil {
		t.Fatalf("25 MiB: %v", err)
	}
	r, err = mcpExchange(s, session, transcribeCall(append(at, 0, 0))).send(t.Context())
	if err == nil {
		err = expect(r, 200, `"isError":true`, "audio_base64 holds 26214402 bytes of audio; the limit is 26214400 (25 MiB)")
	}
	if err != nil {
		t.Fatalf("25 MiB + 2 bytes: %v", err)
	}
}

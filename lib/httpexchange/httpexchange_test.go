package httpexchange

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// front serves h behind the exchange: the edge's end (Proxy, with admit) in front of
// mcpgateway's (Server) on a loopback gRPC server, which stop ends as a replica's death would.
func front(t *testing.T, h http.HandlerFunc, admit func(http.ResponseWriter, *http.Request, *mcpgatewayv1.Admit) (func(), bool)) (url string, stop func()) {
	t.Helper()
	g := grpc.NewServer()
	mcpgatewayv1.RegisterHttpServiceServer(g, NewServer(h))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	write := func(w http.ResponseWriter, code int, msg string) { http.Error(w, msg, code) }
	srv := httptest.NewServer(&Proxy{Client: mcpgatewayv1.NewHttpServiceClient(cc), Admit: admit,
		WriteError: write, WriteKeyError: write, WriteLimited: func(w http.ResponseWriter, msg string, _ int64) { http.Error(w, msg, http.StatusTooManyRequests) },
		ReadBody:  func(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) },
		BodyError: func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 400) }})
	t.Cleanup(srv.Close)
	return srv.URL, g.Stop
}

// TestRequestAndResponseCrossWhole: method, path, query, headers and body reach the handler;
// the key goes as the call's metadata, not as a header; hop-by-hop headers stay behind; the
// status, headers and body come back.
func TestRequestAndResponseCrossWhole(t *testing.T) {
	url, _ := front(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		md, _ := metadata.FromIncomingContext(r.Context())
		if r.Method != "PUT" || r.URL.Path != "/a/b c" || r.URL.RawQuery != "x=1&y=2" || string(body) != "hello" ||
			r.Header.Get("X-Thing") != "v" || r.Header.Get("Authorization") != "" || r.Header.Get("Te") != "" ||
			len(md.Get("authorization")) != 1 || md.Get("authorization")[0] != "Bearer k" {
			t.Errorf("the handler got %s %s?%s %q %v (metadata %v)", r.Method, r.URL.Path, r.URL.RawQuery, body, r.Header, md)
		}
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
	}, nil)
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", url+"/a/b%20c?x=1&y=2", strings.NewReader("hello"))
	req.Header.Set("X-Thing", "v")
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("TE", "trailers")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || resp.Header.Get("X-Answer") != "yes" || string(b) != "made" {
		t.Fatalf("answer %d %v %q", resp.StatusCode, resp.Header, b)
	}
}

// TestWholeAnswerInOnePiece: a handler that writes its answer and returns without flushing
// reaches the client with its Content-Length, not chunked (the edge writes it in one piece);
// one that wrote nothing answers a length of 0; one that flushes streams, chunked.
func TestWholeAnswerInOnePiece(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       http.HandlerFunc
		length  int64
		chunked bool
		body    string
	}{
		{"one Write", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}, 11, false, `{"ok":true}`},
		{"two Writes", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ab")
			_, _ = io.WriteString(w, "cd")
		}, -1, true, "abcd"},
		{"nothing written", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }, 0, false, ""},
		{"flushed", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ab")
			w.(http.Flusher).Flush()
		}, -1, true, "ab"},
		{"its own length", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "2")
			_, _ = io.WriteString(w, "ab")
		}, 2, false, "ab"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, _ := front(t, c.h, nil)
			req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/mcp", strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
			if resp.ContentLength != c.length || chunked != c.chunked || string(b) != c.body {
				t.Fatalf("Content-Length %d (want %d), Transfer-Encoding %v, body %q (want %q)", resp.ContentLength, c.length, resp.TransferEncoding, b, c.body)
			}
		})
	}
}

// TestAdmissions: a handler's Admit reaches the edge before the work; admitted, it goes on
// and the edge's release runs when the response ends; refused, the edge's answer is the
// client's and the handler stops.
func TestAdmissions(t *testing.T) {
	var released, worked atomic.Int32
	refuse := atomic.Bool{}
	url, _ := front(t, func(w http.ResponseWriter, r *http.Request) {
		if !Admit(r, &mcpgatewayv1.Admit{Weight: 3, HeldOpen: true, HoldGroup: "g"}) {
			return
		}
		worked.Add(1)
		_, _ = io.WriteString(w, "done")
	}, func(w http.ResponseWriter, _ *http.Request, a *mcpgatewayv1.Admit) (func(), bool) {
		if a.GetWeight() != 3 || !a.GetHeldOpen() || a.GetHoldGroup() != "g" {
			t.Errorf("admit %v", a)
		}
		if refuse.Load() {
			http.Error(w, "over the budget", http.StatusTooManyRequests)
			return nil, false
		}
		return func() { released.Add(1) }, true
	})
	get := func() (int, string) {
		resp, err := http.Get(url + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 200 || body != "done" || worked.Load() != 1 || released.Load() != 1 {
		t.Fatalf("admitted: %d %q, worked %d, released %d", code, body, worked.Load(), released.Load())
	}
	refuse.Store(true)
	if code, body := get(); code != 429 || !strings.Contains(body, "over the budget") || worked.Load() != 1 {
		t.Fatalf("refused: %d %q, worked %d", code, body, worked.Load())
	}
}

// TestAdmitOutsideAnExchangeAdmits: a handler served directly (a test of its own) is admitted.
func TestAdmitOutsideAnExchangeAdmits(t *testing.T) {
	if !Admit(httptest.NewRequest("GET", "/", nil), &mcpgatewayv1.Admit{HeldOpen: true}) {
		t.Fatal("refused outside an exchange")
	}
}

// TestStreamsAndCancelsBothWays: each chunk reaches the client as written (before the
// handler ends); the client going away cancels the handler's request.
func TestStreamsAndCancelsBothWays(t *testing.T) {
	cancelled := make(chan struct{})
	url, _ := front(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush() // as a handler that streams must under net/http
		<-r.Context().Done()
		close(cancelled)
	}, nil)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/s", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first chunk %q %v", line, err)
	}
	resp.Body.Close() // the client goes away
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's request was not cancelled when its client went away")
	}
}

// TestBrokenExchangeEndsWithTheHandlersLastWord: mcpgateway dies after the head; the edge
// ends the body with what the handler left (IfBroken).
func TestBrokenExchangeEndsWithTheHandlersLastWord(t *testing.T) {
	wrote := make(chan struct{})
	url, stop := front(t, func(w http.ResponseWriter, r *http.Request) {
		IfBroken(w, []byte("last word\n"))
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		close(wrote)
		<-r.Context().Done()
	}, nil)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/s", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-wrote
	stop() // the replica dies
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
	if string(b) != "first\nlast word\n" {
		t.Fatalf("body %q", b)
	}
}

// endedClient is an HttpServiceClient whose calls mcpgateway has already ended with status:
// Send reports io.EOF, as gRPC's does once the server has returned, and Recv the status.
type endedClient struct{ status error }

func (c endedClient) Exchange(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[mcpgatewayv1.HttpServiceExchangeRequest, mcpgatewayv1.HttpServiceExchangeResponse], error) {
	return endedStream{ctx: ctx, status: c.status}, nil
}

type endedStream struct {
	grpc.ClientStream
	ctx    context.Context
	status error
}

func (s endedStream) Send(*mcpgatewayv1.HttpServiceExchangeRequest) error { return io.EOF }
func (s endedStream) Recv() (*mcpgatewayv1.HttpServiceExchangeResponse, error) {
	return nil, s.status
}
func (s endedStream) CloseSend() error { return nil }

// TestRefusalBeforeTheRequestIsRead: mcpgateway that refuses a call before reading its request
// (a key, a limit) ends the stream, so the request's Send sees io.EOF; the answer is the
// refusal's status (401 for Unauthenticated), not a 500 naming EOF. (The race showed under
// load: TestEvery401CarriesBearer got 500 {"message":"EOF"} once.)
func TestRefusalBeforeTheRequestIsRead(t *testing.T) {
	var wrote int
	write := func(w http.ResponseWriter, code int, msg string) { wrote = code; http.Error(w, msg, code) }
	p := &Proxy{Client: endedClient{status.Error(codes.Unauthenticated, "Invalid or missing API key")},
		WriteError: write, WriteKeyError: write, WriteLimited: func(w http.ResponseWriter, msg string, _ int64) { write(w, http.StatusTooManyRequests, msg) },
		ReadBody:  func(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) },
		BodyError: func(w http.ResponseWriter, err error) { write(w, http.StatusBadRequest, err.Error()) }}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", strings.NewReader(`{}`)))
	if rec.Code != http.StatusUnauthorized || wrote != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Invalid or missing API key") {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
}

// BenchmarkWholeAnswer is one POST answered with one JSON body through both ends over
// loopback gRPC, as the federated path's tool calls are: go test -run '^$' -bench WholeAnswer
// -benchmem ./lib/httpexchange/
func BenchmarkWholeAnswer(b *testing.B) {
	answer := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Echo: bench"}]}}`)
	g := grpc.NewServer()
	mcpgatewayv1.RegisterHttpServiceServer(g, NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go g.Serve(lis)
	b.Cleanup(g.Stop)
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	write := func(w http.ResponseWriter, code int, msg string) { http.Error(w, msg, code) }
	srv := httptest.NewServer(&Proxy{Client: mcpgatewayv1.NewHttpServiceClient(cc), WriteError: write, WriteKeyError: write,
		WriteLimited: func(w http.ResponseWriter, msg string, _ int64) { http.Error(w, msg, http.StatusTooManyRequests) },
		ReadBody:     func(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) },
		BodyError:    func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 400) }})
	b.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench"}}}`
	b.ReportAllocs()
	for b.Loop() {
		resp, err := srv.Client().Post(srv.URL+"/mcp/servers/everything", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(answer)) {
			b.Fatalf("%d, %d bytes", resp.StatusCode, n)
		}
	}
}

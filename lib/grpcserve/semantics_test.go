package grpcserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/logging"
	"github.com/zestmcp/zest/lib/logging/logtest"
	"github.com/zestmcp/zest/lib/metrics"
	"github.com/zestmcp/zest/lib/requestid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The call-semantics table: what a call between Zest's services means is what a plain gRPC
// call means — deadline, cancellation, metadata both ways, every interceptor (key, request id,
// recovery), status with details, size limits — and a call that fails fails alone. It runs
// against a server built by New and clients built by grpcdial.Dial, the only path calls take.

const (
	testKey  = "semantics-key"
	maxBytes = 4 << 20 // the smallest limit a service accepts
)

// echo is a test service: what a call does depends on its request's text.
type echo struct {
	cancelled chan struct{} // closed when a "wait" call sees its context end
	once      sync.Once
	// handled counts the calls gRPC handed to the service's method handlers, which read and
	// decode the message (the unary one before the interceptors run).
	handled atomic.Int32
}

func (e *echo) call(ctx context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	switch cmd, arg, _ := bytes.Cut(in.GetValue(), []byte(":")); string(cmd) {
	case "echo": // metadata in → body; header and trailer out
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "h1"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t1"))
		return wrapperspb.Bytes([]byte(strings.Join(md.Get("x-in"), ",") + "|" + requestid.From(ctx))), nil
	case "deadline": // the caller's deadline arrives as the handler's
		d, ok := ctx.Deadline()
		if !ok {
			return nil, status.Error(codes.FailedPrecondition, "no deadline")
		}
		return wrapperspb.Bytes([]byte(time.Until(d).Round(time.Second).String())), nil
	case "wait": // until the caller gives up
		<-ctx.Done()
		e.once.Do(func() { close(e.cancelled) })
		return nil, status.FromContextError(ctx.Err()).Err()
	case "panic":
		panic("boom")
	case "badutf8":
		return nil, status.Error(codes.Unavailable, "stderr said \xff\xfe then died")
	case "details":
		st, _ := status.New(codes.FailedPrecondition, "needs a model").WithDetails(durationpb.New(3 * time.Second))
		return nil, st.Err()
	case "big": // an answer over the limit
		return wrapperspb.Bytes(bytes.Repeat([]byte("x"), maxBytes+1)), nil
	default:
		return wrapperspb.Bytes(arg), nil
	}
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "zest.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		srv.(*echo).handled.Add(1)
		in := &wrapperspb.BytesValue{}
		if err := dec(in); err != nil {
			return nil, err
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/zest.test.Echo/Call"}
		return ic(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return srv.(*echo).call(ctx, req.(*wrapperspb.BytesValue))
		})
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
		srv.(*echo).handled.Add(1)
		in := &wrapperspb.BytesValue{}
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		if string(in.GetValue()) == "panic" {
			_ = ss.SendMsg(wrapperspb.Bytes([]byte("first")))
			panic("stream boom")
		}
		for range 3 {
			if err := ss.SendMsg(wrapperspb.Bytes(in.GetValue())); err != nil {
				return err
			}
		}
		return nil
	}}},
}

func startEcho(t *testing.T) (*grpc.ClientConn, *echo) {
	cc, e, _ := startEchoAt(t)
	return cc, e
}

func startEchoAt(t *testing.T) (*grpc.ClientConn, *echo, string) {
	return startEchoLogged(t, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func startEchoLogged(t *testing.T, log *slog.Logger) (*grpc.ClientConn, *echo, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Guard: keyauth.Guard{Keys: keyauth.Keys{API: testKey}}, DrainTimeout: time.Second, MaxMessageBytes: maxBytes,
		Logger: log})
	e := &echo{cancelled: make(chan struct{})}
	s.RegisterService(&echoDesc, e)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	cc, err := grpcdial.Dial(lis.Addr().String(), testKey, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc, e, lis.Addr().String()
}

func invoke(ctx context.Context, cc *grpc.ClientConn, req []byte, opts ...grpc.CallOption) (string, error) {
	out := &wrapperspb.BytesValue{}
	err := cc.Invoke(ctx, "/zest.test.Echo/Call", wrapperspb.Bytes(req), out, opts...)
	return string(out.GetValue()), err
}

func TestCallSemantics(t *testing.T) {
	cc, e, addr := startEchoAt(t)
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"metadata in, header and trailer out, request id forwarded", func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(requestid.With(t.Context(), "rid-123"), "x-in", "a", "x-in", "b")
			var header, trailer metadata.MD
			got, err := invoke(ctx, cc, []byte("echo"), grpc.Header(&header), grpc.Trailer(&trailer))
			if err != nil || got != "a,b|rid-123" || header.Get("x-header")[0] != "h1" || trailer.Get("x-trailer")[0] != "t1" {
				t.Fatalf("got %q, %v, header %v, trailer %v", got, err, header, trailer)
			}
		}},
		{"the caller's deadline is the handler's", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if got, err := invoke(ctx, cc, []byte("deadline")); err != nil || got != "30s" {
				t.Fatalf("got %q, %v", got, err)
			}
		}},
		{"a deadline that passes ends the call with DeadlineExceeded", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			if _, err := invoke(ctx, cc, []byte("wait")); status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("err = %v", err)
			}
		}},
		{"cancelling the caller cancels the handler", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { _, err := invoke(ctx, cc, []byte("wait")); errc <- err }()
			time.AfterFunc(100*time.Millisecond, cancel)
			if err := <-errc; status.Code(err) != codes.Canceled {
				t.Fatalf("err = %v", err)
			}
			select {
			case <-e.cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler never saw the cancellation")
			}
		}},
		{"the key check runs: a wrong key is refused", func(t *testing.T) {
			wrong, err := grpcdial.Dial(addr, "wrong", maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer wrong.Close()
			if _, err := invoke(t.Context(), wrong, []byte("echo")); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("err = %v", err)
			}
		}},
		{"a panic fails its own call with Internal and an incident id", func(t *testing.T) {
			_, err := invoke(t.Context(), cc, []byte("panic"))
			if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "incident") {
				t.Fatalf("err = %v", err)
			}
			if got, err := invoke(t.Context(), cc, []byte("x:still up")); err != nil || got != "still up" {
				t.Fatalf("after the panic: %q, %v", got, err)
			}
		}},
		{"a panic in a stream fails that stream only", func(t *testing.T) {
			st, err := cc.NewStream(t.Context(), &echoDesc.Streams[0], "/zest.test.Echo/Stream")
			if err != nil {
				t.Fatal(err)
			}
			_ = st.SendMsg(wrapperspb.Bytes([]byte("panic")))
			_ = st.CloseSend()
			var last error
			for {
				if last = st.RecvMsg(&wrapperspb.BytesValue{}); last != nil {
					break
				}
			}
			if status.Code(last) != codes.Internal {
				t.Fatalf("stream ended with %v", last)
			}
		}},
		{"a status message that is not UTF-8 arrives as valid UTF-8", func(t *testing.T) {
			_, err := invoke(t.Context(), cc, []byte("badutf8"))
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.Unavailable || !utf8.ValidString(msg) || !strings.Contains(msg, "then died") {
				t.Fatalf("err = %q", msg)
			}
		}},
		{"status details travel", func(t *testing.T) {
			_, err := invoke(t.Context(), cc, []byte("details"))
			st := status.Convert(err)
			if st.Code() != codes.FailedPrecondition || len(st.Details()) != 1 {
				t.Fatalf("status = %v details %v", st, st.Details())
			}
			if d, ok := st.Details()[0].(*durationpb.Duration); !ok || d.AsDuration() != 3*time.Second {
				t.Fatalf("detail = %v", st.Details()[0])
			}
		}},
		{"a request over the limit fails alone with ResourceExhausted", func(t *testing.T) {
			_, err := invoke(t.Context(), cc, append([]byte("x:"), bytes.Repeat([]byte("y"), maxBytes)...))
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("err = %v", err)
			}
		}},
		{"an answer over the limit fails alone with ResourceExhausted", func(t *testing.T) {
			if _, err := invoke(t.Context(), cc, []byte("big")); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("err = %v", err)
			}
		}},
		{"a request just under the limit passes", func(t *testing.T) {
			body := bytes.Repeat([]byte("z"), maxBytes-64)
			if got, err := invoke(t.Context(), cc, append([]byte("x:"), body...)); err != nil || len(got) != len(body) {
				t.Fatalf("len %d, %v", len(got), err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// TestKeyIsCheckedBeforeTheMessageIsRead: a call without the key, or with a wrong one, is
// refused from its headers with the status and message the key check has always given: its
// message is never read or decoded (no method handler runs; one over the size limit is refused
// for its key, not for its size), on unary calls and streams alike. The refusal is logged with
// the caller's request id and counted; a call with the key goes through on the same server.
func TestKeyIsCheckedBeforeTheMessageIsRead(t *testing.T) {
	var logs logtest.Buffer
	log, err := logging.New(&logs, "test", "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	cc, e, addr := startEchoLogged(t, log)
	refused := func() float64 {
		return testutil.ToFloat64(metrics.GRPCRefused.WithLabelValues("zest.test.Echo", "Call", "Unauthenticated"))
	}
	before := refused()
	for _, key := range []string{"", "wrong"} {
		bad, err := grpcdial.Dial(addr, key, 2*maxBytes) // it may send more than the server takes
		if err != nil {
			t.Fatal(err)
		}
		defer bad.Close()
		for _, body := range [][]byte{[]byte("echo"), bytes.Repeat([]byte("y"), maxBytes-64), bytes.Repeat([]byte("y"), maxBytes+1)} {
			_, err := invoke(requestid.With(t.Context(), "rid-keyless"), bad, body)
			if st := status.Convert(err); st.Code() != codes.Unauthenticated || st.Message() != keyauth.ErrInvalidAPIKey.Error() {
				t.Fatalf("key %q, %d bytes: %v, want Unauthenticated %q", key, len(body), err, keyauth.ErrInvalidAPIKey)
			}
		}
		st, err := bad.NewStream(t.Context(), &echoDesc.Streams[0], "/zest.test.Echo/Stream")
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SendMsg(wrapperspb.Bytes([]byte("x")))
		_ = st.CloseSend()
		if err := st.RecvMsg(&wrapperspb.BytesValue{}); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("key %q: stream: %v, want Unauthenticated", key, err)
		}
	}
	if n := e.handled.Load(); n != 0 {
		t.Fatalf("%d refused calls reached a method handler (their messages were read)", n)
	}
	if got := refused() - before; got != 6 {
		t.Errorf("zest_grpc_server_refused_total{Call,Unauthenticated} grew by %v, want 6", got)
	}
	if !strings.Contains(logs.String(), `"request_id":"rid-keyless"`) || !strings.Contains(logs.String(), `"code":"Unauthenticated"`) {
		t.Errorf("the refusals are not logged with their request id:\n%s", logs.String())
	}
	if got, err := invoke(t.Context(), cc, []byte("x:keyed")); err != nil || got != "keyed" || e.handled.Load() != 1 {
		t.Fatalf("a call with the key: %q, %v (handled %d)", got, err, e.handled.Load())
	}
}

// TestFailingCallsFailAlone: small calls running beside oversized, panicking and badly
// encoded ones on the same connection all succeed.
func TestFailingCallsFailAlone(t *testing.T) {
	cc, _ := startEcho(t)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%25 == 0 { // 12 failing calls of every kind among them
				bad := [][]byte{append([]byte("x:"), bytes.Repeat([]byte("y"), maxBytes)...), []byte("panic"), []byte("badutf8"), []byte("big")}[i/25%4]
				if _, err := invoke(t.Context(), cc, bad); err == nil {
					errs <- errors.New("a failing call succeeded")
				}
				return
			}
			if got, err := invoke(t.Context(), cc, []byte("x:small")); err != nil || got != "small" {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call failed: %v", err)
	}
}

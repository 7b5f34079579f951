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
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/keyauth"
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
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Guard: keyauth.Guard{Keys: keyauth.Keys{API: testKey}}, DrainTimeout: time.Second, MaxMessageBytes: maxBytes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
		{"the key interceptor runs: a wrong key is refused", func(t *testing.T) {
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

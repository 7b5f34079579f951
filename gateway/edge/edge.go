// Package edge is the stateless HTTP surface of Zest as a library: /mcp, /internal/mcp/*
// (grpc-gateway onto AdminService), the OpenAI-compatible routes under the four prefixes,
// and /live. It keeps no state: any number of replicas can run behind a load balancer.
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/zestmcp/zest/gateway/console"
	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/logstream"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/clientmetadata"
	"github.com/zestmcp/zest/lib/grpcdial"
	"github.com/zestmcp/zest/lib/httpexchange"
	"github.com/zestmcp/zest/lib/httpstatus"
	"github.com/zestmcp/zest/lib/listen"
	"github.com/zestmcp/zest/lib/oauthrs"
	"github.com/zestmcp/zest/lib/ratelimit"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Prefixes are the four roots of the OpenAI-compatible API, as Lemonade serves them.
var Prefixes = []string{"/api/v1/", "/api/v0/", "/v1/", "/v0/"}

// Edge is the HTTP edge.
type Edge struct {
	cfg     Config
	log     *slog.Logger
	conns   []*grpc.ClientConn
	backend map[string]*grpc.ClientConn // service name → connection, for health
	infer   inferencev1.InferenceServiceClient
	handler http.Handler
	// challenge is the WWW-Authenticate of a 401 on path when it is not plain Bearer (an MCP
	// endpoint's, with an issuer configured); nil or "": Bearer.
	challenge func(path string) string
}

// New connects to the services (lazily) and builds the routes.
func New(cfg Config, log *slog.Logger) (*Edge, error) {
	if log == nil {
		log = slog.Default()
	}
	// The edge's log lines are kept for Lemonade's GUI log panel (/logs/stream, lemond.go).
	logs := logstream.New(levelOf(log), 0)
	log = slog.New(logs.Wrap(log.Handler(), "zest-gateway"))
	e := &Edge{cfg: cfg, log: log, backend: map[string]*grpc.ClientConn{}}
	// The edge forwards each caller's own Authorization header; it adds no key of its own.
	// mcpgateway and inference may be several replicas: grpcdial balances over the healthy
	// ones. The tool hosts are only asked their health, which the edge reads itself: over
	// several, the check reaches one that is connected, so the edge is healthy while one
	// serves (mcpgateway moves the servers of one that died).
	for name, addr := range map[string]string{"mcpgateway": cfg.McpgatewayAddr, "inference": cfg.InferenceAddr, "toolhost": cfg.ToolhostAddr} {
		// The tool hosts are only asked their health, which reports its own failures.
		opts := grpcdial.LogUnavailable(log)
		if name == "toolhost" {
			opts = []grpc.DialOption{grpc.WithDisableHealthCheck()}
		}
		cc, err := grpcdial.Dial(addr, "", cfg.GRPCMaxMessageBytes, opts...)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.conns = append(e.conns, cc)
		e.backend[name] = cc
	}
	e.infer = inferencev1.NewInferenceServiceClient(e.backend["inference"])

	admin := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newAdminMarshaler()),
		runtime.WithErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			adminError(w, r, err, cfg.MaxAdminBodyBytes)
		}),
		runtime.WithRoutingErrorHandler(adminRoutingError),
		// Forward no request header as gRPC metadata but Authorization (grpc-gateway always
		// passes that one, and mcpgateway checks it): the services read nothing else, and
		// every forwarded header is encoded by the edge and decoded by mcpgateway on every
		// call. The request id needs no header: each call's context derives from the
		// request's, which carries it, and grpcdial's interceptor sends it as x-request-id.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(adminRoute),
	)
	// ListTools answers are kept encoded and written as JSON from their encoding (toolsjson.go).
	if err := mcpgatewayv1.RegisterAdminServiceHandlerClient(context.Background(), admin, lazyAdminClient{
		AdminServiceClient: mcpgatewayv1.NewAdminServiceClient(e.backend["mcpgateway"]), cc: e.backend["mcpgateway"]}); err != nil {
		e.Close()
		return nil, fmt.Errorf("admin routes: %w", err)
	}
	// The MCP Registry's search and install plans (/internal/mcp/registry/*), behind the same
	// admin key: the console asks Zest, never the registry itself.
	if err := mcpgatewayv1.RegisterRegistryServiceHandlerClient(context.Background(), admin, mcpgatewayv1.NewRegistryServiceClient(e.backend["mcpgateway"])); err != nil {
		e.Close()
		return nil, fmt.Errorf("registry routes: %w", err)
	}
	// Sign-in to upstream servers by OAuth (/internal/mcp/servers/{id}/sign-in), admin key.
	if err := mcpgatewayv1.RegisterUpstreamOAuthServiceHandlerClient(context.Background(), admin, mcpgatewayv1.NewUpstreamOAuthServiceClient(e.backend["mcpgateway"])); err != nil {
		e.Close()
		return nil, fmt.Errorf("upstream sign-in routes: %w", err)
	}

	failureRate, err := ratelimit.ParseSetting(cfg.AuthFailureLimit)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("auth-failure-limit (ZEST_AUTH_FAILURE_LIMIT): %w", err)
	}
	g := httpguard.Guard{Keys: cfg.Keys, AllowedOrigins: cfg.AllowedOrigins, Failures: httpguard.NewFailures(failureRate, cfg.RateLimitMaxCallers),
		OAuth: oauthrs.New(cfg.OAuth, oauthrs.WithLogger(log))}
	if host, _, err := net.SplitHostPort(cfg.Addr); err == nil && listen.IsLoopbackHost(host) {
		g.LoopbackOnly = true
	}
	// Limits per key (limits.go) count the calls that passed the key check, before their body
	// is read.
	limits, err := parseKeyLimits(&cfg)
	if err != nil {
		e.Close()
		return nil, err
	}
	// Each route family answers a body over the limit, and a caller over its limits, in its
	// own error shape.
	guarded := func(key func(http.Handler) http.Handler, writeError writeErrorFunc, limited limitedWriter) func(http.Handler) http.Handler {
		return func(h http.Handler) http.Handler {
			return g.CORS(key(limits.wrap(limited, httpguard.LimitBody(cfg.MaxBodyBytes, writeError, h))))
		}
	}
	// A key refused is answered in its family's shape: OpenAI's on the OpenAI routes (its SDKs
	// read it), a JSON-RPC error on the MCP endpoints (an MCP client reads one). The MCP
	// endpoints take an issuer's access tokens too, when one is configured.
	api, mcpAPI := guarded(g.APIKeyAs(openai.WriteError), openai.WriteError, openAILimited), guarded(g.MCPKeyAs(mcpError), mcpError, mcpLimited)
	// The edge's own settings (lemond.go) take the admin key once one is set.
	settings := guarded(g.AdminIfConfigured, openai.WriteError, openAILimited)

	// Every path has a route: one that serves it, or one that answers 404 in the shape of
	// its family (ServeMux's own 404 and 405 are plain text).
	mux := http.NewServeMux()
	mux.Handle("/", g.CORS(notFoundWith(cfg.OAuth.Issuer))) // CORS: a browser must read a 404 as one
	if cfg.OAuth.Enabled() {
		// Each MCP endpoint's protected-resource metadata (RFC 9728), which its 401 points to.
		meta := g.CORS(httpguard.GetOnly(resourceMetadata(cfg.OAuth)))
		mux.Handle(oauthrs.MetadataPath, meta)
		mux.Handle(oauthrs.MetadataPath+"/", meta)
	}
	// The console (gateway/console): GET / and its files under /ui/, same origin as the API.
	ui := console.New()
	mux.Handle("/{$}", ui)
	mux.Handle("/ui/", ui)
	mux.Handle("/live", httpguard.GetOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpguard.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})))
	inAll, err := streamsInAll(cfg.MaxStreams, openFileLimit())
	if err != nil {
		e.Close()
		return nil, err
	}
	held := holds{table: ratelimit.NewKeyed(0)}
	streams := &streams{holds: held, perSession: cfg.StreamsPerSession, perKey: cfg.StreamsPerKey, inAll: inAll, caller: limits.caller}
	// The MCP endpoints go to mcpgateway whole (the generic exchange): it serves the
	// protocol, and asks the edge to count what the request line does not show (admit).
	mcp := &httpexchange.Proxy{Client: mcpgatewayv1.NewHttpServiceClient(e.backend["mcpgateway"]), Log: log,
		Admit: admitter{limits: limits, streams: streams, write: mcpLimited}.admit, WriteError: mcpError, WriteLimited: mcpLimited,
		WriteKeyError: mcpError, ReadBody: httpguard.ReadBody, BodyError: bodyError(mcpError)}
	mux.Handle("/mcp", mcpAPI(mcp))
	// Federation: one registered server through the same transport, guards and keys.
	mux.Handle("/mcp/servers/{id}", mcpAPI(mcp))
	// A preset's providers aggregated on one endpoint (the path value "preset" tells it apart).
	mux.Handle("/mcp/presets/{preset}", mcpAPI(mcp))
	// Every other path under /mcp is mcpgateway's too (it answers what it does not serve).
	mux.Handle("/mcp/", mcpAPI(mcp))
	adminRoutes := g.AdminNotConfigured(g.CORS(g.AdminKey(limits.wrap(adminLimited, httpguard.LimitBody(cfg.MaxAdminBodyBytes, writeAdminError, admin)))))
	// The audit export streams JSON lines with a handler of its own (auditexport.go).
	mux.Handle("/internal/mcp/audit/export", g.AdminNotConfigured(g.CORS(g.AdminKey(limits.wrap(adminLimited, httpguard.LimitBody(cfg.MaxAdminBodyBytes, writeAdminError,
		auditExport{admin: mcpgatewayv1.NewAdminServiceClient(e.backend["mcpgateway"]), log: log, limit: cfg.MaxAdminBodyBytes}))))))
	mux.Handle("/internal/mcp/", adminRoutes)
	// The authorization server's callback after an upstream sign-in: a browser without a key,
	// the state its credential (mcpgateway checks it).
	mux.Handle("GET "+oauthCallbackPath, oauthCallback{client: mcpgatewayv1.NewUpstreamOAuthServiceClient(e.backend["mcpgateway"]), log: log})
	// Zest's client ID metadata document, its client_id where an upstream's authorization
	// server takes one (lib/clientmetadata): public, fetched by that server.
	if _, ok := clientmetadata.URL(cfg.OAuth.PublicURL); ok {
		mux.Handle("GET "+clientmetadata.Path, clientmetadata.Handler(cfg.OAuth.PublicURL))
	}
	mux.Handle("/internal/mcp", adminRoutes) // grpc-gateway's 404, instead of ServeMux's redirect
	oa := &openai.API{Inference: e.infer, Media: inferencev1.NewMediaServiceClient(e.backend["inference"]), ToolChat: mcpgatewayv1.NewChatServiceClient(e.backend["mcpgateway"]), Log: log, Forward: forwardAuth}
	oa.Models = inferencev1.NewModelAdminServiceClient(e.backend["inference"])
	oa.Text = inferencev1.NewTextServiceClient(e.backend["inference"])
	for _, p := range Prefixes {
		mux.Handle(p+"health", api(httpguard.GetOnly(http.HandlerFunc(e.health))))
		oa.Register(mux, p, api)
		mux.Handle(p, api(http.HandlerFunc(notFound)))
		mux.Handle(strings.TrimSuffix(p, "/"), api(http.HandlerFunc(notFound)))
	}
	(&lemond{cfg: cfg, log: log, streams: inAll, held: held, guard: g, infer: e.infer, options: inferencev1.NewModelOptionsServiceClient(e.backend["inference"]),
		models: inferencev1.NewModelAdminServiceClient(e.backend["inference"]), logs: logs,
		audit: mcpgatewayv1.NewAdminServiceClient(e.backend["mcpgateway"])}).register(mux, api, settings, g.CORS)
	e.handler = e.root(g.Host(routed(mux)))
	if cfg.OAuth.Enabled() {
		e.challenge = func(path string) string {
			if endpoint, ok := oauthrs.Endpoint(path); ok {
				return cfg.OAuth.Challenge(endpoint)
			}
			return ""
		}
	}
	return e, nil
}

// adminRoute tells the access line the admin route's template
// ("/internal/mcp/servers/{id}/connect"), which grpc-gateway knows here: it runs before
// every admin call (as a metadata hook, adding none).
func adminRoute(ctx context.Context, r *http.Request) metadata.MD {
	if p, ok := runtime.HTTPPathPattern(ctx); ok {
		setRoute(r.Context(), p)
	}
	return nil
}

// Handler is the edge's root HTTP handler.
func (e *Edge) Handler() http.Handler { return e.handler }

// Run listens on cfg.Addr and serves until ctx is done, then drains and closes.
func (e *Edge) Run(ctx context.Context) error {
	lis, err := listen.TCP(e.cfg.Addr)
	if err != nil {
		e.Close()
		return fmt.Errorf("listen %s: %w", e.cfg.Addr, err)
	}
	return e.Serve(ctx, lis)
}

// Serve serves on lis until ctx is done, then drains and closes.
func (e *Edge) Serve(ctx context.Context, lis net.Listener) error {
	defer e.Close()
	// Bodies are bounded per request (bodyDeadline says why not with ReadTimeout).
	// Each connection remembers the key it proved (httpguard.ConnContext): another caller's
	// wrong keys from the same address do not slow it.
	srv := &http.Server{Handler: e.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: e.cfg.IdleTimeout,
		ConnContext: httpguard.ConnContext}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	e.log.Info("http serving", "addr", lis.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), e.cfg.DrainTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		e.log.Warn("http drain timed out; closing connections")
		err = srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	e.log.Info("http stopped")
	return err
}

// Close releases the client connections.
func (e *Edge) Close() error {
	var errs []error
	for _, cc := range e.conns {
		errs = append(errs, cc.Close())
	}
	e.conns = nil
	return errors.Join(errs...)
}

// adminError writes Lemonade's admin error shape with the status of the one table
// (httpstatus), and what the admin routes say beyond a code: a body over the limit is 413; a
// tools/call of a tool the server's filters do not expose is 400, one that waits for an
// approval not given is 403, a disabled server, one an administrator disconnected or a tool
// whose changed definition is held 409 (all FailedPrecondition with a reason); on the routes that reach an MCP server (connect, refresh-tools, tools/call, test) a
// failure that is not the caller's (no bad argument, key, unknown id or limit) and not out of
// time (504) is 502.
func adminError(w http.ResponseWriter, r *http.Request, err error, limit int64) {
	st := status.Convert(err)
	msg := st.Message()
	code := httpstatus.FromCode(st.Code())
	switch {
	case strings.Contains(msg, "http: request body too large"):
		code, msg = http.StatusRequestEntityTooLarge, httpguard.TooLargeMessage(limit)
	case st.Code() == codes.FailedPrecondition && adminReason(st) == mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_FILTERED:
		code = http.StatusBadRequest
	case st.Code() == codes.FailedPrecondition && adminReason(st) == mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_APPROVAL_NOT_GIVEN:
		code = http.StatusForbidden // the call needs approval and was not run: the message says why
	case st.Code() == codes.FailedPrecondition && (adminReason(st) == mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISABLED ||
		adminReason(st) == mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_SERVER_DISCONNECTED ||
		adminReason(st) == mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_TOOL_HELD):
		code = http.StatusConflict // a state an administrator set or decides: the message says how to undo it
	case callersOwn(st.Code()), st.Code() == codes.DeadlineExceeded:
	case reachesUpstream(r.URL.Path):
		code = http.StatusBadGateway
	}
	httpstatus.SetHeaders(w.Header(), st)
	writeAdminErrorParam(w, code, msg, httpstatus.BadField(st))
}

// callersOwn are the codes of refusals the caller can fix (a bad argument, a key, an unknown
// id — the registry's, since upstream failures are Unavailable — or a limit): their status
// is the table's on every admin route.
func callersOwn(c codes.Code) bool {
	switch c {
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.ResourceExhausted, codes.NotFound:
		return true
	}
	return false
}

// adminReason is the AdminErrorReason of st's ErrorInfo (UNSPECIFIED without one): a tool
// its server's filters do not expose (TOOL_FILTERED), an approval not given.
func adminReason(st *status.Status) mcpgatewayv1.AdminErrorReason {
	domain := string(mcpgatewayv1.File_zest_mcpgateway_v1_admin_proto.Package())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == domain {
			return mcpgatewayv1.AdminErrorReason(mcpgatewayv1.AdminErrorReason_value[info.GetReason()])
		}
	}
	return mcpgatewayv1.AdminErrorReason_ADMIN_ERROR_REASON_UNSPECIFIED
}

// writeAdminError writes {"error":{"message","type":"mcp_client_error","status_code"}}, and
// "param" (OpenAI's name) when the error names a field of the request. (A 401 gets its
// WWW-Authenticate header from the root handler's response.)
func writeAdminError(w http.ResponseWriter, code int, msg string) {
	writeAdminErrorParam(w, code, msg, "")
}

func writeAdminErrorParam(w http.ResponseWriter, code int, msg, param string) {
	e := map[string]any{"message": msg, "type": "mcp_client_error", "status_code": code}
	if param != "" {
		e["param"] = param
	}
	httpguard.WriteJSON(w, code, map[string]any{"error": e})
}

func reachesUpstream(path string) bool {
	for _, suffix := range []string{"/connect", "/refresh-tools", "/tools/call"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return path == "/internal/mcp/servers/test"
}

// adminRoutingError answers a wrong method with 405 (grpc-gateway's default is 501).
func adminRoutingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if code == http.StatusNotFound {
		noRoute(r.Context())
	}
	msg := "No route for " + r.Method + " " + r.URL.Path
	if code == http.StatusMethodNotAllowed {
		msg = "Method " + r.Method + " is not allowed on " + r.URL.Path
	}
	writeAdminError(w, code, msg)
}

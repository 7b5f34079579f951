package upstream

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"github.com/zestmcp/zest/services/mcpgateway/oauthclient"
	"github.com/zestmcp/zest/services/mcpgateway/serverconfig"
	"google.golang.org/protobuf/proto"
)

func onBehalfConfig(url string) *mcpgatewayv1.ServerConfig {
	return &mcpgatewayv1.ServerConfig{Id: "tx", Url: url, Transport: serverconfig.TransportHTTP, Enabled: proto.Bool(true),
		Oauth: &mcpgatewayv1.UpstreamOAuth{ClientId: "zest", Grant: serverconfig.GrantTokenExchange}}
}

// TestOnBehalfServerConnectsForACallerOnly: a server called on behalf of each caller (oauth.grant
// token_exchange) is not connected for a request without a caller's access token (an
// administrator's by key, Zest's own): the connect fails with the error that names the
// setting, and nothing reaches the server.
func TestOnBehalfServerConnectsForACallerOnly(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	m := New(nil, nil, slog.New(slog.DiscardHandler))
	m.SetOAuth(oauthclient.New(nil, nil, nil, srv.Client(), nil, nil))
	err := m.Connect(t.Context(), onBehalfConfig(srv.URL))
	if !errors.Is(err, oauthclient.ErrNoCallerToken) || !strings.Contains(err.Error(), "oauth.grant is token_exchange") {
		t.Fatalf("connect without a caller: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the server", hits.Load())
	}
}

// TestOnBehalfServerHasNoStreamOfItsOwn: a server called on behalf of each caller gets no
// subscriptions/listen stream (nor, in the session era, a GET stream): no caller's token would
// carry it, and it would be retried every second for ever. Its first request fails at once,
// saying why.
func TestOnBehalfServerHasNoStreamOfItsOwn(t *testing.T) {
	tr, err := transport.NewStreamableHTTP("http://127.0.0.1:1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	s := &httpSession{cfg: onBehalfConfig("http://127.0.0.1:1/mcp"), log: slog.New(slog.DiscardHandler), tr: tr, modern: true,
		listening: map[string]bool{"toolsListChanged": true}}
	s.mu.Lock()
	start := s.relisten()
	<-start.done
	s.mu.Lock()
	stop := s.stopListen
	s.mu.Unlock()
	if stop != nil {
		stop()
		t.Fatal("a listen stream was opened")
	}
	if start.err == nil || !strings.Contains(start.err.Error(), "on behalf of each caller") {
		t.Fatalf("the stream's first request: %v", start.err)
	}
}

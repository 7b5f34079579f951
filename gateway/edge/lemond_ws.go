package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/keyauth"
)

// WebSocket limits, explicit.
const (
	// wsReadLimit caps one message from the browser: GUI3 sends small JSON control messages
	// (logs.subscribe, auth).
	wsReadLimit = 16 << 10
	// wsMaxConns caps the open /logs/stream and /spans/stream sockets together; past it an
	// upgrade is answered 503.
	wsMaxConns = 64
	// wsSubscribeTimeout is how long a /logs/stream socket may wait before sending its
	// logs.subscribe (or a /spans/stream socket its auth, when the URL carried no key).
	wsSubscribeTimeout = 30 * time.Second
	// wsWriteTimeout bounds one message's write to a browser that stopped reading.
	wsWriteTimeout = 10 * time.Second
)

type wsLimits struct{ open atomic.Int64 }

// wsToken is the key a WebSocket upgrade carries: Authorization, or ?api_key= (GUI3's way,
// a browser cannot set headers on an upgrade).
func wsToken(r *http.Request) (string, bool) {
	if t := keyauth.BearerToken(r.Header.Get("Authorization")); t != "" {
		return t, true
	}
	if q := r.URL.Query(); q.Has("api_key") {
		return strings.TrimPrefix(q.Get("api_key"), "Bearer "), true
	}
	return "", false
}

// accept upgrades r after the key check (CORS and Host have run: the upgrade's Origin is
// one the edge allows, so the library's same-origin check, which would refuse GUI3 served
// from another origin, is off). keyOptional lets a request without a key in (spans: GUI3
// authenticates with a first message instead). A nil conn means the answer is written.
func (l *lemond) accept(w http.ResponseWriter, r *http.Request, keyOptional bool) (*websocket.Conn, bool, func()) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Open a WebSocket with GET")
		return nil, false, nil
	}
	tok, has := wsToken(r)
	authed := false
	if has || !keyOptional {
		if err := l.guard.Verify(r, tok, l.cfg.Keys.CheckAPI); err != nil {
			httpguard.Refuse(w, err)
			return nil, false, nil
		}
		authed = true
	} else {
		authed = l.cfg.Keys.API == ""
	}
	if l.ws.open.Add(1) > wsMaxConns {
		l.ws.open.Add(-1)
		httpguard.WriteError(w, http.StatusServiceUnavailable, "too many log and span streams open: the limit is 64")
		return nil, false, nil
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		l.ws.open.Add(-1)
		return nil, false, nil // Accept wrote the answer (400 for a request that is no upgrade)
	}
	c.SetReadLimit(wsReadLimit)
	return c, authed, func() { l.ws.open.Add(-1) }
}

// wsMessage is a message GUI3 sends.
type wsMessage struct {
	Type     string  `json:"type"`
	AfterSeq *uint64 `json:"after_seq"`
	Token    string  `json:"token"`
	APIKey   string  `json:"api_key"`
}

func wsError(msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"message": msg, "type": "invalid_request_error"}}
}

func writeWS(ctx context.Context, c *websocket.Conn, v any) error {
	ctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	return wsjson.Write(ctx, c, v)
}

// readWS reads one JSON message; a message that is not JSON is answered with an error
// message and skipped, as lemond does.
func readWS(ctx context.Context, c *websocket.Conn) (wsMessage, error) {
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return wsMessage{}, err
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			if err := writeWS(ctx, c, wsError("Invalid JSON: "+err.Error())); err != nil {
				return wsMessage{}, err
			}
			continue
		}
		return m, nil
	}
}

// checkAuth answers an "auth" message of the socket r upgraded: auth.ok when its token is
// accepted. A wrong token counts as a failed authentication of r's address; from an address
// over that budget the socket is told so and closed (an error ends it).
func (l *lemond) checkAuth(ctx context.Context, r *http.Request, c *websocket.Conn, m wsMessage) (bool, error) {
	tok := m.Token
	if tok == "" {
		tok = m.APIKey
	}
	if err := l.guard.Verify(r, strings.TrimPrefix(tok, "Bearer "), l.cfg.Keys.CheckAPI); err != nil {
		var th *httpguard.ThrottledError
		if errors.As(err, &th) {
			_ = writeWS(ctx, c, wsError(err.Error()))
			c.Close(websocket.StatusPolicyViolation, "too many failed authentications")
			return false, err
		}
		return false, writeWS(ctx, c, wsError("Invalid API key"))
	}
	return true, writeWS(ctx, c, map[string]any{"type": "auth.ok"})
}

// logStream serves /logs/stream as lemond does: after {"type":"logs.subscribe","after_seq":n}
// the socket gets {"type":"logs.snapshot","entries":[…]} (the kept lines after n), then one
// {"type":"logs.entry","entry":{seq,timestamp,severity,tag,line}} per new line of the edge's
// log. A socket that falls too far behind is closed (1013): GUI3 reconnects with after_seq.
func (l *lemond) logStream(w http.ResponseWriter, r *http.Request) {
	c, _, done := l.accept(w, r, false)
	if c == nil {
		return
	}
	defer done()
	defer c.CloseNow()
	ctx := r.Context()
	var after uint64
	for {
		sctx, cancel := context.WithTimeout(ctx, wsSubscribeTimeout)
		m, err := readWS(sctx, c)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				c.Close(websocket.StatusPolicyViolation, "no logs.subscribe within 30s")
			}
			return
		}
		if m.Type == "auth" {
			if _, err := l.checkAuth(ctx, r, c, m); err != nil {
				return
			}
			continue
		}
		if m.Type != "logs.subscribe" {
			if writeWS(ctx, c, wsError("Expected logs.subscribe message")) != nil {
				return
			}
			continue
		}
		if m.AfterSeq != nil {
			after = *m.AfterSeq
		}
		break
	}
	snap, ch, cancel := l.logs.Subscribe(after)
	defer cancel()
	entries := make([]any, 0, len(snap))
	for _, e := range snap {
		entries = append(entries, e)
	}
	if writeWS(ctx, c, map[string]any{"type": "logs.snapshot", "entries": entries}) != nil {
		return
	}
	// Reading goes on in the background: it answers pings and sees the browser close.
	rctx := c.CloseRead(ctx)
	for {
		select {
		case <-rctx.Done():
			return
		case e, ok := <-ch:
			if !ok {
				c.Close(websocket.StatusTryAgainLater, "too slow: reconnect with after_seq")
				return
			}
			if writeWS(ctx, c, map[string]any{"type": "logs.entry", "entry": e}) != nil {
				return
			}
		}
	}
}

// spanStream serves /spans/stream: GUI3's Inspect view authenticates with
// {"type":"auth","token":…} and gets {"type":"auth.ok"}; Zest records no spans yet, so
// nothing else is ever sent. The socket stays open until the browser closes it.
func (l *lemond) spanStream(w http.ResponseWriter, r *http.Request) {
	c, authed, done := l.accept(w, r, true)
	if c == nil {
		return
	}
	defer done()
	defer c.CloseNow()
	ctx := r.Context()
	for {
		rctx := ctx
		var cancel context.CancelFunc = func() {}
		if !authed {
			rctx, cancel = context.WithTimeout(ctx, wsSubscribeTimeout)
		}
		m, err := readWS(rctx, c)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				c.Close(websocket.StatusPolicyViolation, "no auth message within 30s")
			}
			return
		}
		switch {
		case m.Type == "auth":
			ok, err := l.checkAuth(ctx, r, c, m)
			if err != nil {
				return
			}
			authed = authed || ok
		case !authed:
			if writeWS(ctx, c, wsError("Unauthorized. Please authenticate first by sending an auth message.")) != nil {
				return
			}
		}
	}
}

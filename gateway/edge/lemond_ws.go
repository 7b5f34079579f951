package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/keyauth"
	"github.com/zestmcp/zest/lib/ratelimit"
)

// WebSocket limits, explicit.
const (
	// wsReadLimit caps one message from the browser: GUI3 sends small JSON control messages
	// (logs.subscribe, auth).
	wsReadLimit = 16 << 10
	// wsMaxConns caps the open /logs/stream and /spans/stream sockets of callers that
	// presented a key (or need none) together, wsPerKey those of one key (or one address
	// where no key is needed): GUI3 opens two per window.
	wsMaxConns = 64
	wsPerKey   = 16
	// wsMaxPending caps the /spans/stream sockets opened without a key where one is needed
	// (GUI3 sends it in its first message), wsPendingPerAddr those of one address: a pool of
	// their own, so that keyless clients never take a keyed caller's slot.
	wsMaxPending     = 16
	wsPendingPerAddr = 4
	// wsSubscribeTimeout is how long a /logs/stream socket may wait before sending its
	// logs.subscribe (or a /spans/stream socket its auth, when the URL carried no key).
	wsSubscribeTimeout = 30 * time.Second
	// wsWriteTimeout bounds one message's write to a browser that stopped reading.
	wsWriteTimeout = 10 * time.Second
)

// wsSlot is the place a socket holds in the slot bounds: a keyed one, or one pending its key.
type wsSlot struct {
	keyed   bool
	release func()
}

// wsCaller names a socket's caller for its bounds: the key it presented (token), else its
// address.
func (l *lemond) wsCaller(r *http.Request, token string) (scope, label string) {
	switch {
	case l.cfg.Keys.Admin != "" && keyauth.Equal(token, l.cfg.Keys.Admin):
		return "admin", "the admin key (" + keyauth.EnvAdminKey + ")"
	case l.cfg.Keys.API != "" && keyauth.Equal(token, l.cfg.Keys.API):
		return "api", "the API key (" + keyauth.EnvAPIKey + ")"
	}
	addr := httpguard.ClientAddr(r.RemoteAddr)
	return "addr " + addr, "the address " + addr
}

// slot takes a keyed slot (keyed: the caller presented token, or needs no key) or a pending
// one; full is the bound that refused it.
func (l *lemond) slot(r *http.Request, token string, keyed bool) (*wsSlot, *bound) {
	var bounds []bound
	if keyed {
		scope, label := l.wsCaller(r, token)
		bounds = []bound{
			{"ws", wsMaxConns, fmt.Sprintf("the edge holds %d log and span sockets of callers with a key, its limit", wsMaxConns)},
			{"ws of " + scope, wsPerKey, fmt.Sprintf("%s holds %d log and span sockets, its limit", label, wsPerKey)},
		}
	} else {
		addr := httpguard.ClientAddr(r.RemoteAddr)
		bounds = []bound{
			{"ws pending", wsMaxPending, fmt.Sprintf("the edge holds %d span sockets that have not sent their key yet, its limit (a key in ?api_key= takes a slot of its own)", wsMaxPending)},
			{"ws pending of " + addr, wsPendingPerAddr, fmt.Sprintf("the address %s holds %d span sockets that have not sent their key yet, its limit", addr, wsPendingPerAddr)},
		}
	}
	release, full := l.held.take(bounds...)
	if full != nil {
		return nil, full
	}
	return &wsSlot{keyed: keyed, release: release}, nil
}

// promote moves a pending socket's slot to a keyed one once its auth message proved token;
// the bound that refused it, or nil.
func (l *lemond) promote(r *http.Request, s *wsSlot, token string) *bound {
	if s.keyed {
		return nil
	}
	keyed, full := l.slot(r, token, true)
	if full != nil {
		return full
	}
	s.release()
	*s = *keyed
	return nil
}

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
// authenticates with a first message instead), in the pending pool. A socket past its slot
// bounds is refused 429 with Retry-After. A nil conn means the answer is written; the slot
// is the caller's to release.
func (l *lemond) accept(w http.ResponseWriter, r *http.Request, keyOptional bool) (*websocket.Conn, *wsSlot) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Open a WebSocket with GET")
		return nil, nil
	}
	tok, has := wsToken(r)
	keyed := l.cfg.Keys.API == "" // no key needed: every caller counts as keyed, by its address
	if has || !keyOptional {
		if err := l.guard.Verify(r, tok, l.cfg.Keys.CheckAPI); err != nil {
			httpguard.Refuse(w, err)
			return nil, nil
		}
		keyed = true
	}
	slot, full := l.slot(r, tok, keyed)
	if full != nil {
		secs := ratelimit.RetryAfterSeconds(ratelimit.ConcurrencyRetry)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		httpguard.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("Too many log and span sockets: %s; close one, or retry after %d s", full.msg, secs))
		return nil, nil
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		slot.release()
		return nil, nil // Accept wrote the answer (400 for a request that is no upgrade)
	}
	c.SetReadLimit(wsReadLimit)
	return c, slot
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
// accepted, and a pending socket takes a keyed slot in place of its own. A wrong token counts
// as a failed authentication of r's address; from an address over that budget, or with no
// keyed slot left, the socket is told so and closed (an error ends it).
func (l *lemond) checkAuth(ctx context.Context, r *http.Request, c *websocket.Conn, slot *wsSlot, m wsMessage) (bool, error) {
	tok := m.Token
	if tok == "" {
		tok = m.APIKey
	}
	tok = strings.TrimPrefix(tok, "Bearer ")
	if err := l.guard.Verify(r, tok, l.cfg.Keys.CheckAPI); err != nil {
		var th *httpguard.ThrottledError
		if errors.As(err, &th) {
			_ = writeWS(ctx, c, wsError(err.Error()))
			c.Close(websocket.StatusPolicyViolation, "too many failed authentications")
			return false, err
		}
		return false, writeWS(ctx, c, wsError("Invalid API key"))
	}
	if full := l.promote(r, slot, tok); full != nil {
		_ = writeWS(ctx, c, wsError("Too many log and span sockets: "+full.msg+"; close one and connect again"))
		c.Close(websocket.StatusTryAgainLater, "too many sockets")
		return false, errors.New(full.msg)
	}
	return true, writeWS(ctx, c, map[string]any{"type": "auth.ok"})
}

// logStream serves /logs/stream as lemond does: after {"type":"logs.subscribe","after_seq":n}
// the socket gets {"type":"logs.snapshot","entries":[…]} (the kept lines after n), then one
// {"type":"logs.entry","entry":{seq,timestamp,severity,tag,line}} per new line of the edge's
// log. A socket that falls too far behind is closed (1013): GUI3 reconnects with after_seq.
func (l *lemond) logStream(w http.ResponseWriter, r *http.Request) {
	c, slot := l.accept(w, r, false)
	if c == nil {
		return
	}
	defer func() { slot.release() }()
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
			if _, err := l.checkAuth(ctx, r, c, slot, m); err != nil {
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

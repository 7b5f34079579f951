package edge

import (
	"html/template"
	"log/slog"
	"net/http"

	"github.com/zestmcp/zest/lib/clientmetadata"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// oauthCallbackPath is where an authorization server sends the browser back after an
// administrator signed Zest in to an upstream server (services/mcpgateway/oauthclient).
const oauthCallbackPath = clientmetadata.CallbackPath

// oauthCallback relays the callback's state and code to mcpgateway and answers the browser
// with a page that says how it went. The browser holds no key: the state is the credential,
// which mcpgateway checks (one use, within its time bound). The code and state are never
// logged or shown.
type oauthCallback struct {
	client mcpgatewayv1.UpstreamOAuthServiceClient
	log    *slog.Logger
}

var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Zest — {{.Title}}</title></head>
<body><main><h1>{{.Title}}</h1><p id="result" data-status="{{.Status}}">{{.Message}}</p>
<p><a href="/">Back to the console</a></p></main></body></html>
`))

func (c oauthCallback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &mcpgatewayv1.FinishSignInRequest{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error")}
	if q.Has("iss") { // RFC 9207: present, even empty, is not absent
		req.Iss = proto.String(q.Get("iss"))
	}
	resp, err := c.client.FinishSignIn(r.Context(), req)
	page := struct{ Title, Status, Message string }{}
	code := http.StatusOK
	if err != nil {
		code = http.StatusBadRequest
		page.Title, page.Status, page.Message = "Sign-in failed", "failed", status.Convert(err).Message()
		c.log.Info("an upstream OAuth callback was refused", "err", page.Message)
	} else {
		st := resp.GetOauthState()
		page.Title, page.Status = "Signed in", st.GetStatus()
		page.Message = "Zest is signed in to " + resp.GetId()
		if st.GetSubject() != "" {
			page.Message += " as " + st.GetSubject()
		}
		if st.GetExpires() != "" {
			page.Message += " until " + st.GetExpires()
		}
		page.Message += ". You can close this window."
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer") // the URL holds the code
	w.WriteHeader(code)
	_ = callbackPage.Execute(w, page)
}

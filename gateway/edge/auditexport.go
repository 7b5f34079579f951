package edge

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// auditExport serves GET /internal/mcp/audit/export: AdminService.ExportAudit's stream as
// JSON lines (application/x-ndjson), one entry a line, oldest first, written as the batches
// come (grpc-gateway would wrap each message in {"result":…}). It takes ListAudit's filters
// (after, before, kind, server, who). An error before the first entry is the admin API's
// error answer; one after it (the response has started) is a last line {"error":{…}}, so
// that a download that ends early says so.
type auditExport struct {
	admin mcpgatewayv1.AdminServiceClient
	log   *slog.Logger
	limit int64 // the admin body limit, for adminError
}

// exportLine writes an entry with its JSON names; empty fields are left out.
var exportLine = protojson.MarshalOptions{}

func (a auditExport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeAdminError(w, http.StatusMethodNotAllowed, "Method "+r.Method+" is not allowed on "+r.URL.Path+": use GET")
		return
	}
	q := r.URL.Query()
	stream, err := a.admin.ExportAudit(forwardAuth(r), &mcpgatewayv1.ExportAuditRequest{
		After: q.Get("after"), Before: q.Get("before"), Kind: q.Get("kind"), Server: q.Get("server"), Who: q.Get("who")})
	var first *mcpgatewayv1.ExportAuditResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		adminError(w, r, err, a.limit)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="zest-audit-`+time.Now().UTC().Format("20060102T150405Z")+`.jsonl"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	msg := first
	for msg != nil {
		var buf []byte
		for _, e := range msg.GetEntries() {
			line, err := exportLine.Marshal(e)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			buf = append(append(buf, line...), '\n')
		}
		if _, err := w.Write(buf); err != nil {
			return // the client went away; the stream's context ends with the request's
		}
		_ = rc.Flush()
		if msg, err = stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				a.fail(w, r, err)
			}
			return
		}
	}
}

// fail ends a started export with an error line: {"error":{"message":…,"type":"mcp_client_error"}}.
func (a auditExport) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	a.log.Warn("audit export ended early", "err", err)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": status.Convert(err).Message(), "type": "mcp_client_error"}})
	_, _ = w.Write(append(b, '\n'))
}

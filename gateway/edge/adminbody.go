package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/zestmcp/zest/lib/adminjson"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// adminMarshaler is the admin routes' marshaler: answers are protojson (snake_case, every
// field emitted, as Lemonade's GUI reads them); request bodies are read with Lemonade's rules
// (lib/adminjson: bare or wrapped, camelCase aliases, unknown fields refused, types checked
// with messages that name the field) into the typed AdminService messages.
type adminMarshaler struct {
	runtime.JSONPb
}

func newAdminMarshaler() *adminMarshaler {
	return &adminMarshaler{runtime.JSONPb{MarshalOptions: protojson.MarshalOptions{EmitUnpopulated: true}}}
}

// Marshal writes an answer in the admin answers' shape (lib/adminjson: a server's state one
// flat object, every field of a config): a ListTools or ListServers answer kept encoded
// (lazyAdminClient) straight from its encoding (appendJSON), or decoded first when appendJSON
// declines it; any other answer with protojson, then adminjson.Shape.
func (m *adminMarshaler) Marshal(v any) ([]byte, error) {
	if msg, b, ok := lazyEncoding(v); ok {
		if out, ok := appendJSON(make([]byte, 0, len(b)+len(b)/4), msg.ProtoReflect().Descriptor(), b); ok {
			return out, nil
		}
		full := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, full); err != nil {
			return nil, err
		}
		v = full
	}
	out, err := m.JSONPb.Marshal(v)
	if msg, ok := v.(proto.Message); ok && err == nil {
		return adminjson.Shape(msg.ProtoReflect().Descriptor(), out)
	}
	return out, err
}

// NewDecoder reads the whole body and decodes it by the request it fills. grpc-gateway calls
// it only for the routes with body:"*" in admin.proto, one case each.
func (m *adminMarshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		body, err := io.ReadAll(r)
		if err != nil {
			return err // a body over the limit: the error handler answers 413
		}
		switch req := v.(type) {
		case *mcpgatewayv1.UpsertServerRequest:
			req.Server, req.UpdateMask, err = adminjson.Server(body)
		case *mcpgatewayv1.UpdateServerRequest:
			req.Server, req.UpdateMask, err = adminjson.ServerPatch(body)
		case *mcpgatewayv1.TestServerRequest:
			req.Server, _, err = adminjson.Server(body)
		case *mcpgatewayv1.UpsertPresetRequest:
			req.Preset, req.UpdateMask, err = adminjson.Preset(body)
		case *mcpgatewayv1.CallToolRequest:
			err = adminjson.CallTool(body, req)
		case *mcpgatewayv1.ApproveToolCallRequest:
			req.Reason, err = adminjson.Reason(body)
		case *mcpgatewayv1.DenyToolCallRequest:
			req.Reason, err = adminjson.Reason(body)
		case *mcpgatewayv1.AcceptToolPinsRequest:
			req.Tools, err = adminjson.PinTools(body)
		case *mcpgatewayv1.RefuseToolPinsRequest:
			req.Tools, err = adminjson.PinTools(body)
		case *mcpgatewayv1.StartSignInRequest:
			req.RedirectUri, err = signInBody(body)
		default: // a route given a body later fails here until it has a case, not served without it
			err = fmt.Errorf("the admin routes have no reader for a %T body", v)
		}
		return err
	})
}

// signInBody reads POST /internal/mcp/servers/{id}/sign-in's {"redirect_uri": "…"}, or an
// empty body (mcpgateway's ZEST_PUBLIC_URL gives the callback).
func signInBody(body []byte) (string, error) {
	var in struct {
		RedirectURI string `json:"redirect_uri"`
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return "", fmt.Errorf(`%w: the body must be {"redirect_uri": "https://HOST/internal/mcp/oauth/callback"}, Zest's callback as the browser reaches it`, adminjson.ErrRequest)
	}
	return in.RedirectURI, nil
}

package edge

import (
	"errors"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/api/httpbody"
)

// rawBody is the admin routes' marshaler. Messages are JSON (snake_case); a google.api.HttpBody
// passes through as bytes both ways, so that a tool call's arguments and result are decoded
// once, by mcpgateway, and never turned into protobuf Structs on the way.
type rawBody struct {
	runtime.HTTPBodyMarshaler
}

func (m *rawBody) NewDecoder(r io.Reader) runtime.Decoder {
	inner := m.HTTPBodyMarshaler.NewDecoder(r)
	return runtime.DecoderFunc(func(v any) error {
		var dst *httpbody.HttpBody
		switch b := v.(type) {
		case **httpbody.HttpBody:
			if *b == nil {
				*b = &httpbody.HttpBody{}
			}
			dst = *b
		case *httpbody.HttpBody:
			dst = b
		default:
			return bodyError(inner.Decode(v))
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		dst.ContentType, dst.Data = "application/json", data
		return nil
	})
}

// bodyError keeps protojson's text out of the answer: grpc-gateway puts a decoding error's
// text in the 400 it answers, and a google.protobuf.Struct body decodes from any JSON object,
// so every error but a read error (too large, too slow) means the body was not one.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	if err == nil || errors.Is(err, io.EOF) || errors.As(err, &tooLarge) || errors.Is(err, errBodyTimeout) {
		return err
	}
	return errors.New("the request body must be a JSON object")
}

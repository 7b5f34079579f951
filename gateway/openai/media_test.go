package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/lib/grpctest"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeMedia answers every media call with fixed bytes, or fails naming a field like the node.
type fakeMedia struct {
	inferencev1.UnimplementedMediaServiceServer
	mu   sync.Mutex
	edit *inferencev1.EditImageRequest
	mesh *inferencev1.Generate3DRequest
}

func (f *fakeMedia) Speech(_ context.Context, req *inferencev1.SpeechRequest) (*inferencev1.SpeechResponse, error) {
	if req.GetResponseFormat() == "mp3" {
		st, _ := status.New(codes.InvalidArgument, "response_format: use wav").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "response_format", Description: "use wav"}}})
		return nil, st.Err()
	}
	return &inferencev1.SpeechResponse{Audio: []byte("RIFF" + req.GetInput()), ContentType: "audio/wav"}, nil
}

func (f *fakeMedia) StreamSpeech(req *inferencev1.StreamSpeechRequest, stream inferencev1.MediaService_StreamSpeechServer) error {
	if req.GetSpeech().GetInput() == "fail" {
		return status.Error(codes.InvalidArgument, "input: refused")
	}
	for i, part := range []string{"RIFF", "one", "two"} {
		c := &inferencev1.StreamSpeechResponse{Audio: []byte(part)}
		if i == 0 {
			c.ContentType = "audio/wav"
		}
		if err := stream.Send(c); err != nil {
			return err
		}
		if req.GetSpeech().GetInput() == "break" && i == 1 {
			return status.Error(codes.Unavailable, "engine died")
		}
	}
	return nil
}

func (f *fakeMedia) GenerateAudio(_ context.Context, req *inferencev1.GenerateAudioRequest) (*inferencev1.GenerateAudioResponse, error) {
	return &inferencev1.GenerateAudioResponse{Audio: []byte("RIFF"), ContentType: "audio/wav"}, nil
}

func (f *fakeMedia) EditImage(_ context.Context, req *inferencev1.EditImageRequest) (*inferencev1.EditImageResponse, error) {
	f.mu.Lock()
	f.edit = req
	f.mu.Unlock()
	return &inferencev1.EditImageResponse{Images: [][]byte{[]byte("png")}, Created: 7}, nil
}

func (f *fakeMedia) Generate3D(_ context.Context, req *inferencev1.Generate3DRequest) (*inferencev1.Generate3DResponse, error) {
	f.mu.Lock()
	f.mesh = req
	f.mu.Unlock()
	return &inferencev1.Generate3DResponse{Glb: []byte("glTF"), ContentType: "model/gltf-binary"}, nil
}

func newMediaEdge(t *testing.T, limit int64) (string, *fakeMedia) {
	t.Helper()
	f := &fakeMedia{}
	cc := grpctest.Loopback(t, func(s *grpc.Server) { inferencev1.RegisterMediaServiceServer(s, f) }, grpc.MaxRecvMsgSize(64<<20))
	api := &API{Media: inferencev1.NewMediaServiceClient(cc), Forward: func(r *http.Request) context.Context { return r.Context() }}
	mux := http.NewServeMux()
	api.Register(mux, "/v1/", func(h http.Handler) http.Handler { return httpguard.LimitBody(limit, WriteError, h) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/", f
}

func form(t *testing.T, files map[string][]byte, fields map[string]string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	for k, v := range files {
		fw, _ := mw.CreateFormFile(k, k+".png")
		_, _ = fw.Write(v)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), &buf
}

// wantParam checks an OpenAI error answer: its status and the field it names.
func wantParam(t *testing.T, a answer, code int, param string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || a.status != code || e.Error.Param == nil || *e.Error.Param != param {
		t.Fatalf("answer %d %s, want %d naming %s", a.status, a.body, code, param)
	}
}

func TestMediaRoutesAnswerBytesAndNameBadFields(t *testing.T) {
	base, f := newMediaEdge(t, 40<<20)
	a := post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m","input":"hi"}`))
	if a.status != 200 || a.header.Get("Content-Type") != "audio/wav" || string(a.body) != "RIFFhi" {
		t.Fatalf("speech: %d %q %q", a.status, a.header.Get("Content-Type"), a.body)
	}
	wantParam(t, post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m","input":"hi","response_format":"mp3"}`)), 400, "response_format")
	wantParam(t, post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m"}`)), 400, "input")
	wantParam(t, post(t, base+"audio/speech", "application/json", strings.NewReader(`{"input":"x"}`)), 400, "model")
	wantParam(t, post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m","input":3}`)), 400, "input")
	wantParam(t, post(t, base+"audio/generations", "application/json", strings.NewReader(`{"model":"m"}`)), 400, "prompt")
	wantParam(t, post(t, base+"audio/generations", "application/json", strings.NewReader(`{"model":"m","prompt":"x","duration":-1}`)), 400, "duration")
	if a := post(t, base+"audio/generations", "application/json", strings.NewReader(`{"model":"m","prompt":"x","duration":2}`)); a.status != 200 || a.header.Get("Content-Type") != "audio/wav" {
		t.Fatalf("audio: %d %s", a.status, a.body)
	}

	ct, body := form(t, map[string][]byte{"image": []byte("img"), "mask": []byte("msk")}, map[string]string{"model": "m", "prompt": "p", "n": "2", "size": "4x4", "user": "ignored"})
	a = post(t, base+"images/edits", ct, body)
	if a.status != 200 || !strings.Contains(string(a.body), base64.StdEncoding.EncodeToString([]byte("png"))) {
		t.Fatalf("edit: %d %s", a.status, a.body)
	}
	if e := f.edit; string(e.GetImage()) != "img" || string(e.GetMask()) != "msk" || e.GetN() != 2 || e.GetWidth() != 4 {
		t.Fatalf("edit request %v", e)
	}
	ct, body = form(t, nil, map[string]string{"model": "m", "prompt": "p"})
	wantParam(t, post(t, base+"images/edits", ct, body), 400, "image")
	ct, body = form(t, map[string][]byte{"image": []byte("i")}, map[string]string{"model": "m"})
	wantParam(t, post(t, base+"images/edits", ct, body), 400, "prompt")
	ct, body = form(t, map[string][]byte{"image": []byte("i")}, map[string]string{"model": "m", "prompt": "p", "n": "11"})
	wantParam(t, post(t, base+"images/edits", ct, body), 400, "n")
	ct, body = form(t, map[string][]byte{"image": []byte("i")}, map[string]string{"model": "m", "prompt": "p", "size": "big"})
	wantParam(t, post(t, base+"images/edits", ct, body), 400, "size")
	// Each upload has its own limit under the body limit.
	ct, body = form(t, map[string][]byte{"image": make([]byte, MaxImageUploadBytes+1)}, map[string]string{"model": "m", "prompt": "p"})
	wantParam(t, post(t, base+"images/edits", ct, body), 413, "image")
	ct, body = form(t, map[string][]byte{"image": []byte("i"), "mask": make([]byte, MaxMaskUploadBytes+1)}, map[string]string{"model": "m", "prompt": "p"})
	wantParam(t, post(t, base+"images/edits", ct, body), 413, "mask")

	a = post(t, base+"3d/generations", "application/json", strings.NewReader(`{"model":"m","image":"data:image/png;base64,`+base64.StdEncoding.EncodeToString([]byte("pic"))+`","resolution":1024}`))
	if a.status != 200 || a.header.Get("Content-Type") != "model/gltf-binary" || string(f.mesh.GetImage()) != "pic" || f.mesh.GetResolution() != 1024 {
		t.Fatalf("3d: %d %s %v", a.status, a.body, f.mesh)
	}
	ct, body = form(t, map[string][]byte{"image": []byte("pic2")}, map[string]string{"model": "m"})
	if a = post(t, base+"3d/generations", ct, body); a.status != 200 || string(f.mesh.GetImage()) != "pic2" {
		t.Fatalf("3d multipart: %d %s", a.status, a.body)
	}
	wantParam(t, post(t, base+"3d/generations", "application/json", strings.NewReader(`{"model":"m"}`)), 400, "image")
	wantParam(t, post(t, base+"3d/generations", "application/json", strings.NewReader(`{"model":"m","image":"%%%"}`)), 400, "image")
	wantParam(t, post(t, base+"3d/generations", "application/json", strings.NewReader(`{"model":"m","image":"aGk=","response_format":"obj"}`)), 400, "response_format")
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxImageUploadBytes+3))
	wantParam(t, post(t, base+"3d/generations", "application/json", strings.NewReader(`{"model":"m","image":"`+big+`"}`)), 413, "image")
}

func TestMediaUploadOverTheBodyLimitNamesTheField(t *testing.T) {
	base, _ := newMediaEdge(t, 1<<20)
	ct, body := form(t, map[string][]byte{"image": make([]byte, 2<<20)}, map[string]string{"model": "m", "prompt": "p"})
	// Sent chunked (no Content-Length) so that the limit is met while the image is read.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"images/edits", struct{ *bytes.Buffer }{body})
	req.Header.Set("Content-Type", ct)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	wantParam(t, answer{status: resp.StatusCode, body: buf.Bytes()}, 413, "image")
}

func TestSpeechStreamsChunkByChunk(t *testing.T) {
	base, _ := newMediaEdge(t, 1<<20)
	a := post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m","input":"hi","stream_format":"audio"}`))
	if a.status != 200 || a.header.Get("Content-Type") != "audio/wav" || string(a.body) != "RIFFonetwo" || a.header.Get("Content-Length") != "" {
		t.Fatalf("stream: %d %v %q", a.status, a.header, a.body)
	}
	wantParam(t, post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m","input":"x","stream_format":"sse"}`)), 400, "stream_format")
	if a := post(t, base+"audio/speech", "application/json", strings.NewReader(`{"model":"m","input":"fail","stream_format":"audio"}`)); a.status != 400 {
		t.Fatalf("refused stream: %d %s", a.status, a.body)
	}
	// Broken after the first chunks: the transfer is aborted, not ended as if whole.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"audio/speech", strings.NewReader(`{"model":"m","input":"break","stream_format":"audio"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a broken stream read as complete")
	}
}

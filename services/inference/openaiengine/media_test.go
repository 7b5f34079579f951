package openaiengine

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// TestStreamSpeechRelaysEachPieceAsItArrives: the engine sends its first bytes and waits; the
// relay must have passed them on before the engine sends the rest.
func TestStreamSpeechRelaysEachPieceAsItArrives(t *testing.T) {
	release := make(chan struct{})
	var asked map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&asked)
		w.Header().Set("Content-Type", "audio/pcm")
		_, _ = io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "second")
	}))
	t.Cleanup(srv.Close)
	e := engine(t, "up", srv.URL+"/v1")
	var got []string
	err := e.StreamSpeech(t.Context(), &inferencev1.SpeechRequest{Model: "m", Input: "hi", ResponseFormat: "pcm"}, func(c *inferencev1.StreamSpeechResponse) error {
		if len(got) == 0 {
			if c.GetContentType() != "audio/pcm" {
				t.Errorf("first piece type %q", c.GetContentType())
			}
			close(release) // only now may the engine go on
		}
		got = append(got, string(c.GetAudio()))
		return nil
	})
	if err != nil || len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("%v %q", err, got)
	}
	if asked["stream_format"] != "audio" || asked["model"] != "up" || asked["response_format"] != "pcm" {
		t.Fatalf("asked %v", asked)
	}
}

// TestRefusalKeepsTheEngineParam: an engine's 400 naming a field stays a ParamError.
func TestRefusalKeepsTheEngineParam(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"error":{"message":"no mp3","param":"response_format"}}`)
	}))
	t.Cleanup(srv.Close)
	_, err := engine(t, "up", srv.URL+"/v1").Speech(t.Context(), &inferencev1.SpeechRequest{Model: "m", Input: "x", ResponseFormat: "mp3"})
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "response_format" || !errors.Is(err, ErrUpstreamRequest) {
		t.Fatalf("%v", err)
	}
}

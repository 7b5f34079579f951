package transcription

import (
	"errors"
	"strings"
	"testing"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

func TestCheckFormat(t *testing.T) {
	for _, f := range append([]string{""}, Formats...) {
		if err := CheckFormat(f); err != nil {
			t.Errorf("CheckFormat(%q) = %v", f, err)
		}
	}
	for f, want := range map[string]string{"srt": "segment times", "vtt": "segment times", "xml": `not "xml"`} {
		err := CheckFormat(f)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "use json, text or verbose_json") && f != "xml" {
			t.Errorf("CheckFormat(%q) = %v; want ErrFormat saying %q", f, err, want)
		}
	}
}

func TestBody(t *testing.T) {
	r := &inferencev1.TranscribeResponse{Text: "hi", Language: "en", DurationSeconds: 1.5}
	if b := Body("json", false, r); len(b) != 1 || b["text"] != "hi" {
		t.Errorf("json body = %v", b)
	}
	if b := Body("verbose_json", true, r); b["task"] != "translate" {
		t.Errorf("a translation's verbose_json: %v", b)
	}
	if b := Body("verbose_json", false, r); b["task"] != "transcribe" || b["language"] != "en" || b["duration"] != 1.5 {
		t.Errorf("verbose_json body = %v", b)
	}
}

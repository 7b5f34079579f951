// Package transcription holds what the transcription route (POST {prefix}audio/transcriptions)
// and the lemonade_transcribe_audio tool share: the response formats Zest can give, and the
// JSON body of each, so that the two agree on what they take and what they answer.
package transcription

import (
	"errors"
	"fmt"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
)

// Formats are the response formats Zest's engines can give: OpenAI's json, text and
// verbose_json. srt and vtt need the time of each segment, which TranscribeResponse does not
// carry (no engine returns them), so they are refused rather than answered as plain text.
var Formats = []string{"json", "text", "verbose_json"}

// ErrFormat means a response_format Zest cannot give.
var ErrFormat = errors.New("unsupported response_format")

// CheckFormat refuses a format other than "" (json) and Formats, saying why and what to use.
func CheckFormat(format string) error {
	switch format {
	case "", "json", "text", "verbose_json":
		return nil
	case "srt", "vtt":
		return fmt.Errorf("%w: response_format %s needs segment times, which Zest's transcription engines do not return; use json, text or verbose_json", ErrFormat, format)
	}
	return fmt.Errorf("%w: response_format must be json, text or verbose_json, not %q", ErrFormat, format)
}

// Body is the JSON answer of format json ({"text"}) or verbose_json ({"task","text",
// "language","duration"}; task "translate" for a translation, else "transcribe"); for text
// the route answers the text alone.
func Body(format string, translate bool, resp *inferencev1.TranscribeResponse) map[string]any {
	if format == "verbose_json" {
		task := "transcribe"
		if translate {
			task = "translate"
		}
		return map[string]any{"task": task, "text": resp.GetText(), "language": resp.GetLanguage(), "duration": resp.GetDurationSeconds()}
	}
	return map[string]any{"text": resp.GetText()}
}

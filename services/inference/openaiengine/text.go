package openaiengine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/zestmcp/zest/lib/sse"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// postRaw sends body to the model's engine at path (e.g. "/embeddings"); stream asks for an
// event stream. The caller closes the body and calls done.
func (e *Engine) postRaw(ctx context.Context, m *Model, path string, body []byte, stream bool) (*http.Response, func(), error) {
	return e.send(ctx, m, func(base string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, "POST", base+path, bytes.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
			if stream {
				r.Header.Set("Accept", "text/event-stream")
			}
		}
		return r, err
	})
}

// maxCompletionBytes bounds a completion an engine answers as one JSON body, and one line of
// its event stream (which may carry a whole completion in one chunk): an engine that sends an
// endless line gets an error (sse.ErrTooLong), not the inference service's memory.
const maxCompletionBytes = 64 << 20

// readEvents calls each with the data of every event of an event stream as it arrives, until
// [DONE], the end of the body, or each answers stop. A line or an event longer than
// maxCompletionBytes breaks the stream.
func readEvents(ctx context.Context, body io.Reader, each func(data []byte) (stop bool, err error)) error {
	rd := bufio.NewReaderSize(sse.Limit(body, maxCompletionBytes), 64<<10)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			line = nil // cut short: not an event
		}
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
			data = bytes.TrimSpace(data)
			if string(data) == "[DONE]" {
				return nil
			}
			if stop, ferr := each(data); ferr != nil || stop {
				return ferr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: the stream broke: %w", ErrUpstream, err)
		}
	}
}

func isEventStream(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

// Embeddings asks the engine's /embeddings for float vectors, in one request.
func (e *Engine) Embeddings(ctx context.Context, req *inferencev1.EmbeddingsRequest) (*inferencev1.EmbeddingsResponse, error) {
	m, err := e.model(req.GetModel())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	in := map[string]any{"model": m.Cfg.UpstreamModel, "input": req.GetInput(), "encoding_format": "float"}
	if req.GetDimensions() > 0 {
		in["dimensions"] = req.GetDimensions()
	}
	body, _ := json.Marshal(in)
	resp, done, err := e.postRaw(ctx, m, "/embeddings", body, false)
	if err != nil {
		return nil, err
	}
	defer done()
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int32 `json:"prompt_tokens"`
			TotalTokens  int32 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: the embeddings are not JSON of float vectors: %v", ErrUpstream, err)
	}
	if len(out.Data) != len(req.GetInput()) {
		return nil, fmt.Errorf("%w: %d embeddings for %d inputs", ErrUpstream, len(out.Data), len(req.GetInput()))
	}
	sort.SliceStable(out.Data, func(i, j int) bool { return out.Data[i].Index < out.Data[j].Index })
	res := &inferencev1.EmbeddingsResponse{Usage: &inferencev1.Usage{PromptTokens: out.Usage.PromptTokens, TotalTokens: out.Usage.TotalTokens}}
	for _, d := range out.Data {
		res.Data = append(res.Data, &inferencev1.Embedding{Vector: d.Embedding})
	}
	return res, nil
}

// completionChunk is an OpenAI text_completion (chunk).
type completionChunk struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Choices []struct {
		Index        int32  `json:"index"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int32 `json:"prompt_tokens"`
		CompletionTokens int32 `json:"completion_tokens"`
		TotalTokens      int32 `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (c *completionChunk) toResponse(model string) *inferencev1.CompletionsResponse {
	out := &inferencev1.CompletionsResponse{Id: c.ID, Model: model, Created: c.Created}
	for _, ch := range c.Choices {
		out.Choices = append(out.Choices, &inferencev1.CompletionChoice{Index: ch.Index, Text: ch.Text, FinishReason: ch.FinishReason})
	}
	if c.Usage != nil {
		out.Usage = &inferencev1.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens, TotalTokens: c.Usage.TotalTokens}
	}
	return out
}

// Completions streams a legacy completion from the engine's /completions, relaying each
// chunk as it arrives.
func (e *Engine) Completions(ctx context.Context, req *inferencev1.CompletionsRequest, send func(*inferencev1.CompletionsResponse) error) error {
	m, err := e.model(req.GetModel())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	body, err := upstreamBody(req, m.Cfg.UpstreamModel)
	if err != nil {
		return err
	}
	resp, done, err := e.postRaw(ctx, m, "/completions", body, true)
	if err != nil {
		return err
	}
	defer done()
	defer resp.Body.Close()
	if !isEventStream(resp) { // an engine that ignored "stream": one JSON completion
		var c completionChunk
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxCompletionBytes)).Decode(&c); err != nil {
			return fmt.Errorf("%w: the completion is not JSON: %v", ErrUpstream, err)
		}
		return send(c.toResponse(req.GetModel()))
	}
	return readEvents(ctx, resp.Body, func(data []byte) (bool, error) {
		var c completionChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return true, fmt.Errorf("%w: a stream chunk is not JSON: %v", ErrUpstream, err)
		}
		if c.Error != nil {
			return true, fmt.Errorf("%w: %s", ErrUpstream, c.Error.Message)
		}
		return false, send(c.toResponse(req.GetModel()))
	})
}

// upstreamBody renders a contract request as the engine's OpenAI JSON: the same field names,
// the engine's model id, streamed with usage.
func upstreamBody(req proto.Message, upstream string) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(req)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["model"], m["stream"] = upstream, true
	if s, ok := m["seed"].(string); ok { // protojson writes int64 as a string; engines want a number
		m["seed"] = json.Number(s)
	}
	if _, responses := m["input"]; !responses {
		m["stream_options"] = map[string]any{"include_usage": true}
	} else {
		m["store"] = false // Zest keeps no responses: the engine need not either
	}
	return json.Marshal(m)
}

// responseUsage is the Responses API's usage.
type responseUsage struct {
	InputTokens  int32 `json:"input_tokens"`
	OutputTokens int32 `json:"output_tokens"`
	TotalTokens  int32 `json:"total_tokens"`
}

// responseObject is the part of an OpenAI response object the relay reads.
type responseObject struct {
	ID                string `json:"id"`
	CreatedAt         int64  `json:"created_at"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Output []responseItem `json:"output"`
	Usage  *responseUsage `json:"usage"`
}

type responseItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// end is the last piece, from the finished response.
func (r *responseObject) end(model string) *inferencev1.ResponsesResponse {
	p := &inferencev1.ResponsesResponse{Id: r.ID, Model: model, Created: r.CreatedAt, Status: r.Status}
	if p.Status == "" {
		p.Status = "completed"
	}
	if r.IncompleteDetails != nil {
		p.IncompleteReason = r.IncompleteDetails.Reason
	}
	if u := r.Usage; u != nil {
		p.Usage = &inferencev1.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	}
	return p
}

// responseEvent is one event of an OpenAI Responses stream.
type responseEvent struct {
	Type        string          `json:"type"`
	Delta       string          `json:"delta"`
	OutputIndex int32           `json:"output_index"`
	Item        *responseItem   `json:"item"`
	Response    *responseObject `json:"response"`
	Message     string          `json:"message"`
}

// Responses streams an answer from the engine's /responses, relaying text and function call
// arguments piece by piece as they arrive.
func (e *Engine) Responses(ctx context.Context, req *inferencev1.ResponsesRequest, send func(*inferencev1.ResponsesResponse) error) error {
	m, err := e.model(req.GetModel())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.Cfg.Timeout)
	defer cancel()
	body, err := upstreamBody(req, m.Cfg.UpstreamModel)
	if err != nil {
		return err
	}
	resp, done, err := e.postRaw(ctx, m, "/responses", body, true)
	if err != nil {
		return err
	}
	defer done()
	defer resp.Body.Close()
	model := req.GetModel()
	if !isEventStream(resp) { // an engine that ignored "stream": one response object
		var r responseObject
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxCompletionBytes)).Decode(&r); err != nil {
			return fmt.Errorf("%w: the response is not JSON: %v", ErrUpstream, err)
		}
		for i, it := range r.Output {
			p := &inferencev1.ResponsesResponse{Id: r.ID, Model: model, Created: r.CreatedAt}
			switch it.Type {
			case "message":
				for _, c := range it.Content {
					p.TextDelta += c.Text
				}
			case "function_call":
				p.FunctionCall = &inferencev1.ResponsesFunctionCall{Index: int32(i), CallId: it.CallID, Name: it.Name, ArgumentsDelta: it.Arguments}
			default:
				continue
			}
			if err := send(p); err != nil {
				return err
			}
		}
		return send(r.end(model))
	}
	var id string
	var created int64
	finished := false
	err = readEvents(ctx, resp.Body, func(data []byte) (bool, error) {
		var ev responseEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return true, fmt.Errorf("%w: a stream event is not JSON: %v", ErrUpstream, err)
		}
		p := &inferencev1.ResponsesResponse{Id: id, Model: model, Created: created}
		switch ev.Type {
		case "response.created":
			if ev.Response != nil {
				id, created = ev.Response.ID, ev.Response.CreatedAt
			}
			return false, nil
		case "response.output_text.delta":
			p.TextDelta = ev.Delta
		case "response.output_item.added":
			if ev.Item == nil || ev.Item.Type != "function_call" {
				return false, nil
			}
			p.FunctionCall = &inferencev1.ResponsesFunctionCall{Index: ev.OutputIndex, CallId: ev.Item.CallID, Name: ev.Item.Name, ArgumentsDelta: ev.Item.Arguments}
		case "response.function_call_arguments.delta":
			p.FunctionCall = &inferencev1.ResponsesFunctionCall{Index: ev.OutputIndex, ArgumentsDelta: ev.Delta}
		case "response.completed", "response.incomplete":
			if ev.Response == nil {
				return true, fmt.Errorf("%w: %s carries no response", ErrUpstream, ev.Type)
			}
			finished = true
			return true, send(ev.Response.end(model))
		case "response.failed":
			msg := "the response failed"
			if ev.Response != nil && ev.Response.Error != nil {
				msg = ev.Response.Error.Message
			}
			return true, fmt.Errorf("%w: %s", ErrUpstream, msg)
		case "error":
			return true, fmt.Errorf("%w: %s", ErrUpstream, ev.Message)
		default: // the other events repeat what the deltas said (….done, content_part.…)
			return false, nil
		}
		return false, send(p)
	})
	if err == nil && !finished {
		return fmt.Errorf("%w: the stream ended before response.completed", ErrUpstream)
	}
	return err
}

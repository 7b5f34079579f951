package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/zestmcp/zest/gateway/httpguard"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Input item types the Responses route reads; other types go to the engine as they are.
var messageRoles = []string{"user", "assistant", "system", "developer"}

// responsesRequest reads an OpenAI Responses body. Zest keeps no responses, so what needs a
// stored one (previous_response_id, background) is refused; store is accepted and ignored.
func responsesRequest(raw map[string]any) (req *inferencev1.ResponsesRequest, stream bool, err error) {
	req = &inferencev1.ResponsesRequest{}
	if req.Model, err = requiredModel(raw); err != nil {
		return
	}
	for _, key := range []string{"previous_response_id", "conversation"} {
		if _, ok := presentField(raw, key); ok {
			return nil, false, fieldError(key, "%s is not served: Zest keeps no responses, send the whole conversation in input", key)
		}
	}
	if bg, berr := boolField(raw, "background"); berr != nil || bg {
		if berr == nil {
			berr = fieldError("background", "background is not served: ask with stream instead")
		}
		return nil, false, berr
	}
	if _, err = boolField(raw, "store"); err != nil {
		return
	}
	in, ok := presentField(raw, "input")
	if !ok {
		return nil, false, fieldError("input", "input is required: a string or an array of input items")
	}
	switch x := in.(type) {
	case string:
	case []any:
		if len(x) == 0 {
			return nil, false, fieldError("input", "input holds no items: send a string or at least one input item")
		}
		for i, item := range x {
			if err = inputItem(fmt.Sprintf("input[%d]", i), item); err != nil {
				return
			}
		}
	default:
		return nil, false, mustBeErr("input", "a string or an array of input items", in)
	}
	if req.Input, err = structpb.NewValue(jsonValue(in)); err != nil {
		return nil, false, fieldError("input", "input cannot be read: %v", err)
	}
	if req.Instructions, err = stringField(raw, "instructions"); err != nil {
		return
	}
	var names []string
	if v, ok := presentField(raw, "tools"); ok {
		list, isList := v.([]any)
		if !isList {
			return nil, false, mustBeErr("tools", "an array of tools", v)
		}
		for i, t := range list {
			at := fmt.Sprintf("tools[%d]", i)
			o, isObj := t.(map[string]any)
			if !isObj {
				return nil, false, mustBeErr(at, "a tool object", t)
			}
			typ, isStr := o["type"].(string)
			if !isStr {
				return nil, false, mustBeErr(at+".type", `a string ("function")`, o["type"])
			}
			if typ != "function" {
				continue // other kinds of tools are the engine's to judge
			}
			name, isStr := o["name"].(string)
			if !isStr || name == "" {
				return nil, false, fieldError(at+".name", `%s.name must be the function's name: Responses tools are {"type":"function","name":…,"parameters":{…}}`, at)
			}
			if p, ok := presentField(o, "parameters"); ok {
				if _, isObj := p.(map[string]any); !isObj {
					return nil, false, mustBeErr(at+".parameters", "a JSON Schema object", p)
				}
			}
			names = append(names, name)
		}
		req.Tools, _ = structpb.NewList(jsonValue(list).([]any))
	}
	if v, ok := presentField(raw, "tool_choice"); ok {
		const forms = `"none", "auto", "required" or {"type":"function","name":"…"}`
		switch x := v.(type) {
		case string:
			if x != "none" && x != "auto" && x != "required" {
				return nil, false, fieldError("tool_choice", "tool_choice %q is not one of %s", x, forms)
			}
			if x == "required" && req.Tools == nil {
				return nil, false, fieldError("tool_choice", `tool_choice "required" needs tools: the request has none`)
			}
		case map[string]any:
			name, _ := x["name"].(string)
			if x["type"] != "function" || name == "" {
				return nil, false, fieldError("tool_choice", "tool_choice must be %s", forms)
			}
			if !slices.Contains(names, name) {
				return nil, false, fieldError("tool_choice", "tool_choice names function %q, which is not among the request's function tools (%s)", name, strings.Join(names, ", "))
			}
		default:
			return nil, false, mustBeErr("tool_choice", forms, v)
		}
		req.ToolChoice, _ = structpb.NewValue(jsonValue(v))
	}
	if req.Temperature, err = numberField(raw, "temperature", 0, 2); err != nil {
		return
	}
	if req.TopP, err = numberField(raw, "top_p", 0, 1); err != nil {
		return
	}
	if req.MaxOutputTokens, err = int32Field(raw, "max_output_tokens", 1, math.MaxInt32); err != nil {
		return
	}
	stream, err = boolField(raw, "stream")
	return req, stream, err
}

// inputItem checks one input item: a message ({"role","content"}, "type":"message" optional),
// a function_call or a function_call_output; other types go to the engine unchecked.
func inputItem(at string, item any) error {
	o, isObj := item.(map[string]any)
	if !isObj {
		return mustBeErr(at, "an input item object", item)
	}
	typ, _ := o["type"].(string)
	if t, ok := presentField(o, "type"); ok && typ == "" {
		return mustBeErr(at+".type", "a string", t)
	}
	strs := func(keys ...string) error {
		for _, k := range keys {
			if _, isStr := o[k].(string); !isStr {
				return mustBeErr(at+"."+k, "a string", o[k])
			}
		}
		return nil
	}
	switch typ {
	case "", "message":
		role, _ := o["role"].(string)
		if !slices.Contains(messageRoles, role) {
			return fieldError(at+".role", "%s.role must be one of %s", at, strings.Join(messageRoles, ", "))
		}
		switch c := o["content"].(type) {
		case string:
		case []any:
			for j, p := range c {
				if _, isObj := p.(map[string]any); !isObj {
					return mustBeErr(fmt.Sprintf("%s.content[%d]", at, j), "a content part object", p)
				}
			}
		default:
			return mustBeErr(at+".content", "a string or an array of content parts", o["content"])
		}
	case "function_call":
		return strs("call_id", "name", "arguments")
	case "function_call_output":
		if err := strs("call_id"); err != nil {
			return err
		}
		switch o["output"].(type) {
		case string, []any:
		default:
			return mustBeErr(at+".output", "a string or an array of content parts", o["output"])
		}
	}
	return nil
}

// jsonValue turns json.Number into float64 throughout, for structpb.
func jsonValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	}
	return v
}

// responseItem is one output item being built: the assistant message or a function call.
type responseItem struct {
	id, typ        string
	text           strings.Builder
	callID, name   string
	args           strings.Builder
	done           bool
	outputPosition int
}

func (it *responseItem) json(status string) map[string]any {
	if it.typ == "message" {
		return map[string]any{"id": it.id, "type": "message", "status": status, "role": "assistant",
			"content": []any{textPart(it.text.String())}}
	}
	return map[string]any{"id": it.id, "type": "function_call", "status": status, "call_id": it.callID, "name": it.name, "arguments": it.args.String()}
}

// textPart is a message's output_text content part.
func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// responseBuilder turns the engine's pieces into OpenAI's response object and, when emit is
// set, into the Responses stream events as they happen.
type responseBuilder struct {
	req        *inferencev1.ResponsesRequest
	raw        map[string]any
	id         string
	created    int64
	seq        int
	items      []*responseItem
	message    *responseItem
	calls      map[int32]*responseItem
	status     string
	reason     string
	usage      *inferencev1.Usage
	emit       func(typ string, ev map[string]any) bool // false: the client left
	clientGone bool
}

func (b *responseBuilder) event(typ string, ev map[string]any) {
	if b.emit == nil || b.clientGone {
		return
	}
	ev["type"], ev["sequence_number"] = typ, b.seq
	b.seq++
	if !b.emit(typ, ev) {
		b.clientGone = true
	}
}

func (b *responseBuilder) object() map[string]any {
	output := make([]any, 0, len(b.items))
	for _, it := range b.items {
		st := "in_progress"
		if it.done {
			st = "completed"
		}
		output = append(output, it.json(st))
	}
	var incomplete any
	if b.reason != "" {
		incomplete = map[string]any{"reason": b.reason}
	}
	var instructions any
	if s := b.req.GetInstructions(); s != "" {
		instructions = s
	}
	o := map[string]any{"id": b.id, "object": "response", "created_at": b.created, "status": b.status, "model": b.req.GetModel(),
		"output": output, "error": nil, "incomplete_details": incomplete, "instructions": instructions,
		"tools": []any{}, "tool_choice": "auto", "parallel_tool_calls": true, "previous_response_id": nil,
		"temperature": b.raw["temperature"], "top_p": b.raw["top_p"], "max_output_tokens": b.raw["max_output_tokens"],
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled", "metadata": map[string]any{}, "store": false}
	if t, ok := b.raw["tools"]; ok && t != nil {
		o["tools"] = t
	}
	if t, ok := b.raw["tool_choice"]; ok && t != nil {
		o["tool_choice"] = t
	}
	if u := b.usage; u != nil {
		o["usage"] = map[string]any{"input_tokens": u.GetPromptTokens(), "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": u.GetCompletionTokens(), "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": u.GetTotalTokens()}
	}
	return o
}

func (b *responseBuilder) start() {
	b.status = "in_progress"
	b.event("response.created", map[string]any{"response": b.object()})
	b.event("response.in_progress", map[string]any{"response": b.object()})
}

func (b *responseBuilder) open(it *responseItem) {
	for _, o := range b.items { // items come one after another: a new one ends the others
		b.finish(o)
	}
	it.outputPosition = len(b.items)
	b.items = append(b.items, it)
	// As OpenAI streams it: a message is added with no content, then its one text part is
	// added (the SDKs' accumulators append the part, and fail on a part that is there already).
	added := it.json("in_progress")
	if it.typ == "message" {
		added["content"] = []any{}
	}
	b.event("response.output_item.added", map[string]any{"output_index": it.outputPosition, "item": added})
	if it.typ == "message" {
		b.event("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.outputPosition, "content_index": 0,
			"part": textPart("")})
	}
}

func (b *responseBuilder) finish(it *responseItem) {
	if it.done {
		return
	}
	it.done = true
	if it.typ == "message" {
		text := it.text.String()
		b.event("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.outputPosition, "content_index": 0, "text": text, "logprobs": []any{}})
		b.event("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.outputPosition, "content_index": 0,
			"part": textPart(text)})
	} else {
		b.event("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.outputPosition, "name": it.name, "arguments": it.args.String()})
	}
	b.event("response.output_item.done", map[string]any{"output_index": it.outputPosition, "item": it.json("completed")})
}

// add takes one piece from the engine.
func (b *responseBuilder) add(p *inferencev1.ResponsesResponse) {
	if d := p.GetTextDelta(); d != "" {
		if b.message == nil || b.message.done {
			b.message = &responseItem{id: newID("msg_"), typ: "message"}
			b.open(b.message)
		}
		b.message.text.WriteString(d)
		b.event("response.output_text.delta", map[string]any{"item_id": b.message.id, "output_index": b.message.outputPosition, "content_index": 0, "delta": d, "logprobs": []any{}})
	}
	if fc := p.GetFunctionCall(); fc != nil {
		it := b.calls[fc.GetIndex()]
		if it == nil {
			it = &responseItem{id: newID("fc_"), typ: "function_call", callID: fc.GetCallId(), name: fc.GetName()}
			if it.callID == "" {
				it.callID = newID("call_")
			}
			b.calls[fc.GetIndex()] = it
			b.open(it)
		}
		if d := fc.GetArgumentsDelta(); d != "" {
			it.args.WriteString(d)
			b.event("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.outputPosition, "delta": d})
		}
	}
	if p.GetUsage() != nil {
		b.usage = p.GetUsage()
	}
	if s := p.GetStatus(); s != "" {
		b.status, b.reason = s, p.GetIncompleteReason()
	}
}

// end closes every item and says the response is complete (or incomplete).
func (b *responseBuilder) end() {
	for _, it := range b.items {
		b.finish(it)
	}
	if b.status != "incomplete" {
		b.status = "completed"
	}
	b.event("response."+b.status, map[string]any{"response": b.object()})
}

func (a *API) responses(w http.ResponseWriter, r *http.Request) {
	raw := decodeText(w, r)
	if raw == nil {
		return
	}
	req, streamed, err := responsesRequest(raw)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	stream, err := a.Text.Responses(a.Forward(r), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		writeStatus(w, err) // nothing written yet: a proper HTTP error
		return
	}
	b := &responseBuilder{req: req, raw: raw, id: first.GetId(), created: first.GetCreated(), calls: map[int32]*responseItem{}}
	if b.id == "" || !strings.HasPrefix(b.id, "resp_") {
		b.id = newID("resp_")
	}
	if b.created == 0 {
		b.created = time.Now().Unix()
	}
	if streamed {
		sse := startSSE(w)
		b.emit = func(typ string, ev map[string]any) bool {
			data, err := json.Marshal(ev)
			return err == nil && sse.eventBytes(typ, data)
		}
	}
	b.start()
	for p := first; ; {
		b.add(p)
		if b.clientGone {
			return // r.Context() is cancelled, which ends the engine call
		}
		if p, err = stream.Recv(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) {
		if !streamed {
			writeStatus(w, err)
			return
		}
		b.event("error", map[string]any{"code": "api_error", "message": status.Convert(err).Message(), "param": nil})
		b.status = "failed"
		o := b.object()
		o["error"] = map[string]any{"code": "server_error", "message": status.Convert(err).Message()}
		b.event("response.failed", map[string]any{"response": o})
		return
	}
	b.end()
	if !streamed {
		httpguard.WriteJSON(w, http.StatusOK, b.object())
	}
}

// eventBytes writes one named event of a Responses stream, already encoded; false means the
// client is gone.
func (s sseWriter) eventBytes(typ string, data []byte) bool {
	if _, err := io.WriteString(s.w, "event: "+typ+"\ndata: "+string(data)+"\n\n"); err != nil {
		return false
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return true
}

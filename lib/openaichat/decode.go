package openaichat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zestmcp/zest/lib/jsonerr"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// FieldError is a request that is wrong in one field. Param names the field for OpenAI's
// error.param ("temperature", "messages[1].role"; empty when the body as a whole is wrong);
// Message says what is wrong and what to send, and never quotes a decoder.
type FieldError struct {
	Param   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

func fieldErr(param, format string, a ...any) error {
	return &FieldError{Param: param, Message: fmt.Sprintf(format, a...)}
}

// Roles a chat message may have. "developer" is OpenAI's newer name for "system"; engines
// get "system", which every chat template knows.
var Roles = []string{"system", "developer", "user", "assistant", "tool"}

// DecodeObject reads a JSON object, keeping numbers exact (json.Number). A body that is not
// one is a *FieldError saying where the JSON goes wrong, in words of its own.
func DecodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fieldErr("", "the body is not a JSON object: something follows the object (at byte %d)", dec.InputOffset())
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr("", "the body is not a JSON object: it is %s", jsonerr.KindOf(v))
	}
	return obj, nil
}

func syntaxError(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return fieldErr("", "the body is not a JSON object: invalid JSON at byte %d", syn.Offset)
	case errors.Is(err, io.EOF):
		return fieldErr("", "the body is not a JSON object: it is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr("", "the body is not a JSON object: the JSON ends early")
	}
	return fieldErr("", "the body is not a JSON object")
}

func mustBe(param, want string, v any) error {
	return fieldErr(param, "%s must be %s, not %s", param, want, jsonerr.KindOf(v))
}

// present returns args[key] unless it is absent or null (OpenAI clients send null for "unset").
func present(args map[string]any, key string) (any, bool) {
	v, ok := args[key]
	return v, ok && v != nil
}

func number(param string, v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, fieldErr(param, "%s must be a number, not %s", param, n)
		}
	default:
		return 0, mustBe(param, "a number", v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fieldErr(param, "%s must be a finite number", param)
	}
	return f, nil
}

func integer(param string, v any) (int64, error) {
	switch n := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return i, nil
		}
		if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return int64(f), nil // 2.0, 1e3
		}
		return 0, fieldErr(param, "%s must be an integer, not %s", param, n)
	case float64:
		if n != math.Trunc(n) || math.Abs(n) >= 1<<63 {
			return 0, fieldErr(param, "%s must be an integer, not %v", param, n)
		}
		return int64(n), nil
	}
	return 0, mustBe(param, "an integer", v)
}

func optNumber(args map[string]any, key string, lo, hi float64) (*float64, error) {
	v, ok := present(args, key)
	if !ok {
		return nil, nil
	}
	f, err := number(key, v)
	if err != nil {
		return nil, err
	}
	if f < lo || f > hi {
		return nil, fieldErr(key, "%s must be between %g and %g, not %g", key, lo, hi, f)
	}
	return &f, nil
}

func str(param string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", mustBe(param, "a string", v)
	}
	return s, nil
}

func optString(m map[string]any, key, param string) (string, error) {
	v, ok := present(m, key)
	if !ok {
		return "", nil
	}
	return str(param, v)
}

// value converts decoded JSON into a protobuf Value (numbers as doubles, as JSON has them).
func value(v any) *structpb.Value {
	switch x := v.(type) {
	case nil:
		return structpb.NewNullValue()
	case bool:
		return structpb.NewBoolValue(x)
	case float64:
		return structpb.NewNumberValue(x)
	case json.Number:
		f, _ := x.Float64()
		return structpb.NewNumberValue(f)
	case string:
		return structpb.NewStringValue(x)
	case []any:
		return structpb.NewListValue(list(x))
	case map[string]any:
		return structpb.NewStructValue(object(x))
	}
	return structpb.NewNullValue() // not produced by encoding/json
}

func list(xs []any) *structpb.ListValue {
	l := &structpb.ListValue{Values: make([]*structpb.Value, len(xs))}
	for i, x := range xs {
		l.Values[i] = value(x)
	}
	return l
}

func object(m map[string]any) *structpb.Struct {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(m))}
	for k, x := range m {
		s.Fields[k] = value(x)
	}
	return s
}

func optObject(args map[string]any, key string) (*structpb.Struct, error) {
	v, ok := present(args, key)
	if !ok {
		return nil, nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return nil, mustBe(key, "an object", v)
	}
	return object(m), nil
}

// FromMap builds the contract's chat request from OpenAI chat completion fields (decoded
// JSON: a request body, or the arguments of lemonade_chat), checking each field it reads:
// types, ranges (temperature 0–2, top_p 0–1, penalties −2–2, max_tokens ≥ 1, n = 1), roles,
// tool messages' tool_call_id, tools and tool_choice. OpenAI's loose spellings are accepted:
// a string stop, max_completion_tokens for max_tokens, array content (content_parts), null
// for an absent field. model may be absent (the caller decides); other fields the contract
// has no place for (user, logprobs, …) are ignored, as OpenAI-compatible servers do.
func FromMap(args map[string]any) (*inferencev1.ChatRequest, error) {
	req := &inferencev1.ChatRequest{}
	var err error
	if req.Model, err = optString(args, "model", "model"); err != nil {
		return nil, err
	}
	if req.Messages, err = messages(args); err != nil {
		return nil, err
	}
	if req.Temperature, err = optNumber(args, "temperature", 0, 2); err != nil {
		return nil, err
	}
	if req.TopP, err = optNumber(args, "top_p", 0, 1); err != nil {
		return nil, err
	}
	for _, key := range []string{"presence_penalty", "frequency_penalty"} {
		if _, err := optNumber(args, key, -2, 2); err != nil {
			return nil, err
		}
	}
	for _, key := range []string{"max_completion_tokens", "max_tokens"} { // max_tokens wins when both are set
		v, ok := present(args, key)
		if !ok {
			continue
		}
		n, err := integer(key, v)
		if err != nil {
			return nil, err
		}
		if n < 1 || n > math.MaxInt32 {
			return nil, fieldErr(key, "%s must be between 1 and %d, not %d", key, math.MaxInt32, n)
		}
		n32 := int32(n)
		req.MaxTokens = &n32
	}
	if v, ok := present(args, "n"); ok {
		n, err := integer("n", v)
		if err != nil {
			return nil, err
		}
		if n != 1 {
			return nil, fieldErr("n", "n must be 1, not %d: this server answers with one choice", n)
		}
	}
	if v, ok := present(args, "seed"); ok {
		s, err := integer("seed", v)
		if err != nil {
			return nil, err
		}
		req.Seed = &s
	}
	if req.Stop, err = stop(args); err != nil {
		return nil, err
	}
	if req.Tools, err = tools(args); err != nil {
		return nil, err
	}
	if req.ToolChoice, err = toolChoice(args); err != nil {
		return nil, err
	}
	if req.ResponseFormat, err = optObject(args, "response_format"); err != nil {
		return nil, err
	}
	if req.ChatTemplateKwargs, err = optObject(args, "chat_template_kwargs"); err != nil {
		return nil, err
	}
	return req, nil
}

func messages(args map[string]any) ([]*inferencev1.ChatMessage, error) {
	v, ok := present(args, "messages")
	if !ok {
		return nil, fieldErr("messages", `messages is required: give at least one message, e.g. [{"role":"user","content":"hello"}]`)
	}
	list, isList := v.([]any)
	if !isList {
		return nil, mustBe("messages", "an array of messages", v)
	}
	if len(list) == 0 {
		return nil, fieldErr("messages", "messages must hold at least one message")
	}
	out := make([]*inferencev1.ChatMessage, len(list))
	for i, item := range list {
		m, err := message(i, item)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

func message(i int, item any) (*inferencev1.ChatMessage, error) {
	at := fmt.Sprintf("messages[%d]", i)
	m, ok := item.(map[string]any)
	if !ok {
		return nil, mustBe(at, "a message object", item)
	}
	v, ok := present(m, "role")
	if !ok {
		return nil, fieldErr(at+".role", "%s.role is required: one of %s", at, strings.Join(Roles, ", "))
	}
	role, err := str(at+".role", v)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(Roles, role) {
		return nil, fieldErr(at+".role", "%s.role %q is not a role: use one of %s", at, role, strings.Join(Roles, ", "))
	}
	if role == "developer" {
		role = "system"
	}
	msg := &inferencev1.ChatMessage{Role: role}
	if c, ok := present(m, "content"); ok {
		switch x := c.(type) {
		case string:
			msg.Content = x
		case []any:
			for j, part := range x {
				p, isObj := part.(map[string]any)
				if !isObj {
					return nil, mustBe(fmt.Sprintf("%s.content[%d]", at, j), "a content part object", part)
				}
				if _, err := str(fmt.Sprintf("%s.content[%d].type", at, j), p["type"]); err != nil {
					return nil, err
				}
			}
			msg.ContentParts = list(x)
		default:
			return nil, mustBe(at+".content", "a string or an array of content parts", c)
		}
	}
	if msg.Name, err = optString(m, "name", at+".name"); err != nil {
		return nil, err
	}
	if msg.ToolCallId, err = optString(m, "tool_call_id", at+".tool_call_id"); err != nil {
		return nil, err
	}
	if role == "tool" && msg.ToolCallId == "" {
		return nil, fieldErr(at+".tool_call_id", "%s is a tool message without tool_call_id: name the tool call it answers", at)
	}
	if v, ok := present(m, "tool_calls"); ok {
		calls, isList := v.([]any)
		if !isList {
			return nil, mustBe(at+".tool_calls", "an array", v)
		}
		for j, c := range calls {
			call, err := toolCall(fmt.Sprintf("%s.tool_calls[%d]", at, j), c)
			if err != nil {
				return nil, err
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
	}
	return msg, nil
}

func toolCall(at string, v any) (*inferencev1.ToolCall, error) {
	c, ok := v.(map[string]any)
	if !ok {
		return nil, mustBe(at, "a tool call object", v)
	}
	// index stays 0 (not sent on to engines) unless the client gave one: OpenAI's requests
	// have none, and a strict engine may refuse a field it does not expect.
	call := &inferencev1.ToolCall{Type: "function", Function: &inferencev1.FunctionCall{}}
	var err error
	if call.Id, err = optString(c, "id", at+".id"); err != nil {
		return nil, err
	}
	if t, err := optString(c, "type", at+".type"); err != nil {
		return nil, err
	} else if t != "" {
		call.Type = t
	}
	if v, ok := present(c, "index"); ok {
		n, err := integer(at+".index", v)
		if err != nil {
			return nil, err
		}
		call.Index = int32(min(max(n, 0), math.MaxInt32))
	}
	fv, ok := present(c, "function")
	if !ok {
		return nil, fieldErr(at+".function", "%s.function is required: {\"name\":…,\"arguments\":\"{…}\"}", at)
	}
	fn, isObj := fv.(map[string]any)
	if !isObj {
		return nil, mustBe(at+".function", "an object", fv)
	}
	if call.Function.Name, err = optString(fn, "name", at+".function.name"); err != nil {
		return nil, err
	}
	if a, ok := present(fn, "arguments"); ok {
		switch x := a.(type) {
		case string:
			call.Function.Arguments = x
		case map[string]any: // some clients send the object itself; engines get its JSON text
			b, _ := json.Marshal(x)
			call.Function.Arguments = string(b)
		default:
			return nil, mustBe(at+".function.arguments", "a string of JSON", a)
		}
	}
	return call, nil
}

func stop(args map[string]any) ([]string, error) {
	v, ok := present(args, "stop")
	if !ok {
		return nil, nil
	}
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, len(x))
		for i, s := range x {
			var err error
			if out[i], err = str(fmt.Sprintf("stop[%d]", i), s); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, mustBe("stop", "a string or an array of strings", v)
}

func tools(args map[string]any) (*structpb.ListValue, error) {
	v, ok := present(args, "tools")
	if !ok {
		return nil, nil
	}
	xs, isList := v.([]any)
	if !isList {
		return nil, mustBe("tools", "an array of tools", v)
	}
	for i, x := range xs {
		at := fmt.Sprintf("tools[%d]", i)
		t, isObj := x.(map[string]any)
		if !isObj {
			return nil, mustBe(at, "a tool object", x)
		}
		typ, err := str(at+".type", t["type"])
		if err != nil {
			return nil, err
		}
		if typ != "function" {
			continue // other kinds of tools are the engine's to judge
		}
		fn, isObj := t["function"].(map[string]any)
		if !isObj {
			return nil, mustBe(at+".function", "an object with the function's name, description and parameters", t["function"])
		}
		if name, err := str(at+".function.name", fn["name"]); err != nil {
			return nil, err
		} else if name == "" {
			return nil, fieldErr(at+".function.name", "%s.function.name must not be empty", at)
		}
	}
	return list(xs), nil
}

const toolChoiceForms = `"none", "auto", "required" or {"type":"function","function":{"name":"…"}}`

func toolChoice(args map[string]any) (*structpb.Value, error) {
	v, ok := present(args, "tool_choice")
	if !ok {
		return nil, nil
	}
	switch x := v.(type) {
	case string:
		if x != "none" && x != "auto" && x != "required" {
			return nil, fieldErr("tool_choice", "tool_choice %q is not one of %s", x, toolChoiceForms)
		}
	case map[string]any:
		fn, _ := x["function"].(map[string]any)
		name, _ := fn["name"].(string)
		if x["type"] != "function" || name == "" {
			return nil, fieldErr("tool_choice", "tool_choice must be %s", toolChoiceForms)
		}
	default:
		return nil, mustBe("tool_choice", toolChoiceForms, v)
	}
	return value(v), nil
}

// CheckToolChoice refuses a tool_choice that cannot be honoured with the request's own
// tools: "required" or a named function with no tools, or a function none of them defines.
// (The chat tool loop adds MCP tools of its own, so it does not call this.)
func CheckToolChoice(req *inferencev1.ChatRequest) error {
	choice := req.GetToolChoice()
	if choice == nil {
		return nil
	}
	var names []string
	for _, t := range req.GetTools().GetValues() {
		if n := t.GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue(); n != "" {
			names = append(names, n)
		}
	}
	if choice.GetStringValue() == "required" && len(req.GetTools().GetValues()) == 0 {
		return fieldErr("tool_choice", `tool_choice "required" needs tools: the request has none`)
	}
	name := choice.GetStructValue().GetFields()["function"].GetStructValue().GetFields()["name"].GetStringValue()
	if name == "" || slices.Contains(names, name) {
		return nil
	}
	if len(names) == 0 {
		return fieldErr("tool_choice", "tool_choice names function %q but the request has no tools", name)
	}
	return fieldErr("tool_choice", "tool_choice names function %q, which is not among the request's tools (%s)", name, strings.Join(names, ", "))
}

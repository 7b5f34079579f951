// Package toolshape is the one home of a preset's tool shaping (Preset.tools): how the
// preset serves each of its providers' tools — under a new name, with a new description,
// hidden, with arguments fixed (out of the schema, always sent) or defaulted (in the schema,
// sent when left out) — and how a call of the shaped tool maps back to the tool itself.
//
// Every place that shows or calls a preset's tools uses one Shape: /mcp/presets/{id} (both
// eras), the chat loop, and tool search. Their tools come in under their chat_name
// (catalog.ChatName, or a built-in lemonade_* name):
//
//	s := toolshape.New(preset.GetTools())
//	shown := s.Tools(listed)              // the visible tools, shaped (MCP Tool objects)
//	chat, args, err := s.Call(name, args) // a shaped call back to the chat_name, merged arguments
//
// The tool-call pipeline then sees the tool itself: filters, approvals and the audit name the
// real tool (the audit's chat_name is the name the caller used).
package toolshape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Shape is one preset's shaping, read from its tools. A nil *Shape shapes nothing.
type Shape struct {
	tools  []*mcpgatewayv1.PresetTool
	byTool map[string]*rule // by chat_name
	byName map[string]*rule // by the name served, for the renamed tools
}

// rule is one tool's shaping, its argument values as JSON.
type rule struct {
	tool, name, description string
	hidden                  bool
	fixed, defaults         map[string]json.RawMessage
}

// New reads a preset's tools (as serverconfig.ParsePreset checked them). Nil when there are
// none.
func New(tools []*mcpgatewayv1.PresetTool) *Shape {
	if len(tools) == 0 {
		return nil
	}
	s := &Shape{tools: tools, byTool: map[string]*rule{}, byName: map[string]*rule{}}
	for _, t := range tools {
		r := &rule{tool: t.GetTool(), name: t.GetName(), description: t.GetDescription(), hidden: t.GetHidden(),
			fixed: values(t.GetArguments().GetFixed()), defaults: values(t.GetArguments().GetDefaults())}
		s.byTool[r.tool] = r
		if r.name != "" {
			s.byName[r.name] = r
		}
	}
	return s
}

// Equal reports whether a and b shape alike: a preset's session is told its tools changed
// when they do not.
func Equal(a, b *Shape) bool {
	var ta, tb []*mcpgatewayv1.PresetTool
	if a != nil {
		ta = a.tools
	}
	if b != nil {
		tb = b.tools
	}
	return slices.EqualFunc(ta, tb, func(x, y *mcpgatewayv1.PresetTool) bool { return proto.Equal(x, y) })
}

// values are argument values as JSON.
func values(m map[string]*structpb.Value) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		b, err := protojson.Marshal(v)
		if err != nil {
			b = []byte("null")
		}
		out[k] = b
	}
	return out
}

// Served is the name the tool chatName is served under, and false when the preset hides it.
func (s *Shape) Served(chatName string) (string, bool) {
	r := s.rule(chatName)
	switch {
	case r == nil:
		return chatName, true
	case r.hidden:
		return "", false
	case r.name != "":
		return r.name, true
	}
	return chatName, true
}

// Has reports whether the preset shapes the tool chatName at all: Tool leaves every other
// tool as it is, so a caller that knows the name may skip it.
func (s *Shape) Has(chatName string) bool { return s.rule(chatName) != nil }

func (s *Shape) rule(chatName string) *rule {
	if s == nil {
		return nil
	}
	return s.byTool[chatName]
}

// Resolve maps a name a caller used back to the tool's chat_name: false for a hidden tool,
// and for the chat_name of a tool served under another name (the preset shows only the new
// one).
func (s *Shape) Resolve(name string) (string, bool) {
	if s == nil {
		return name, true
	}
	if r, ok := s.byName[name]; ok {
		return r.tool, !r.hidden
	}
	if r, ok := s.byTool[name]; ok && (r.hidden || r.name != "") {
		return "", false
	}
	return name, true
}

// Tools are the tools (MCP Tool objects named by chat_name) as the preset serves them: the
// hidden ones left out, the others shaped (Tool).
func (s *Shape) Tools(tools []json.RawMessage) []json.RawMessage {
	if s == nil {
		return tools
	}
	out := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		if shaped, ok := s.Tool(t); ok {
			out = append(out, shaped)
		}
	}
	return out
}

// Tool is one MCP Tool object (named by its chat_name) as the preset serves it, and false
// when the preset hides it: its name and description replaced, its fixed arguments out of the
// input schema, its defaulted ones marked with their default and no longer required.
func (s *Shape) Tool(tool json.RawMessage) (json.RawMessage, bool) {
	var named struct {
		Name string `json:"name"`
	}
	if s == nil || json.Unmarshal(tool, &named) != nil {
		return tool, true
	}
	r := s.rule(named.Name)
	if r == nil { // most tools of a preset: only their name is read
		return tool, true
	}
	if r.hidden {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(tool, &m) != nil {
		return tool, true
	}
	if r.name != "" {
		m["name"], _ = json.Marshal(r.name)
	}
	if r.description != "" {
		m["description"], _ = json.Marshal(r.description)
	}
	if len(r.fixed)+len(r.defaults) > 0 {
		var schema map[string]any
		dec := json.NewDecoder(bytes.NewReader(m["inputSchema"]))
		dec.UseNumber()
		if dec.Decode(&schema) == nil || len(m["inputSchema"]) == 0 {
			m["inputSchema"], _ = json.Marshal(r.schema(schema))
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return tool, true
	}
	return out, true
}

// Function is one tool as the chat loop offers it to a model (an OpenAI function's name,
// description and parameters), shaped as Tool shapes it; false when the preset hides it.
func (s *Shape) Function(chatName, description string, parameters map[string]any) (string, string, map[string]any, bool) {
	r := s.rule(chatName)
	if r == nil {
		return chatName, description, parameters, true
	}
	if r.hidden {
		return "", "", nil, false
	}
	name := chatName
	if r.name != "" {
		name = r.name
	}
	if r.description != "" {
		description = r.description
	}
	if len(r.fixed)+len(r.defaults) > 0 {
		parameters = r.schema(parameters)
	}
	return name, description, parameters, true
}

// schema is the input schema without the fixed arguments, the defaulted ones marked with
// their default; neither is required any more. The schema given is not modified.
func (r *rule) schema(in map[string]any) map[string]any {
	out := maps.Clone(in)
	if out == nil {
		out = map[string]any{"type": "object"}
	}
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	for k := range r.fixed {
		delete(props, k)
	}
	for k, v := range r.defaults {
		p, _ := props[k].(map[string]any)
		p = maps.Clone(p)
		if p == nil {
			p = map[string]any{}
		}
		var d any
		_ = json.Unmarshal(v, &d)
		p["default"] = d
		if props == nil {
			props = map[string]any{}
		}
		props[k] = p
	}
	if props != nil {
		out["properties"] = props
	}
	if req, ok := out["required"].([]any); ok {
		kept := []any{}
		for _, k := range req {
			name, _ := k.(string)
			_, fixed := r.fixed[name]
			_, defaulted := r.defaults[name]
			if !fixed && !defaulted {
				kept = append(kept, k)
			}
		}
		out["required"] = kept
	}
	return out
}

// FixedArgumentError is a call that sends an argument the preset fixes, with another value.
type FixedArgumentError struct {
	Tool, Argument string
}

func (e *FixedArgumentError) Error() string {
	return fmt.Sprintf("argument %q of tool %q is set by this preset: leave it out of the call", e.Argument, e.Tool)
}

// Call maps a call of a tool by the name the caller used back to the tool's chat_name, with
// its arguments merged: the fixed ones set, the defaulted ones filled where absent. args is a
// JSON object (empty: none). False when name is no tool the preset serves (a hidden tool, the
// old name of a renamed one); a *FixedArgumentError when args sets a fixed argument to
// another value (the same value passes).
func (s *Shape) Call(name string, args json.RawMessage) (string, json.RawMessage, bool, error) {
	chat, ok := s.Resolve(name)
	if !ok {
		return "", nil, false, nil
	}
	merged, err := s.Arguments(chat, name, args)
	return chat, merged, true, err
}

// Arguments merges the preset's values for tool chatName into args (a JSON object; empty:
// none), as Call does; name is the name the caller used, for the error.
func (s *Shape) Arguments(chatName, name string, args json.RawMessage) (json.RawMessage, error) {
	r := s.rule(chatName)
	if r == nil || len(r.fixed)+len(r.defaults) == 0 {
		return args, nil
	}
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(args)) > 0 && string(bytes.TrimSpace(args)) != "null" {
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, fmt.Errorf("the arguments of tool %q are not a JSON object: %w", name, err)
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.fixed)) {
		if sent, ok := m[k]; ok && !same(sent, r.fixed[k]) {
			return nil, &FixedArgumentError{Tool: name, Argument: k}
		}
		m[k] = r.fixed[k]
	}
	for k, v := range r.defaults {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// same reports whether two JSON values are equal as values.
func same(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

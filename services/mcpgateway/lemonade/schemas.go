package lemonade

// Argument schemas of the built-in tools, with Lemonade's names (docs/dev/contracts.md, "Built-in tools").

const samplingProps = `
    "temperature": {"type": "number", "minimum": 0, "maximum": 2, "description": "Sampling temperature."},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1, "description": "Nucleus sampling probability mass."},
    "max_tokens": {"type": "integer", "minimum": 1, "description": "Maximum number of tokens to generate."},
    "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "Stop sequence or sequences."},
    "seed": {"type": "integer", "description": "Seed for repeatable sampling where the engine supports it."},
    "tools": {"type": "array", "items": {"type": "object"}, "description": "OpenAI tool definitions offered to the model."},
    "tool_choice": {"anyOf": [{"type": "string", "enum": ["auto", "none", "required"]}, {"type": "object"}], "description": "OpenAI tool_choice."},
    "response_format": {"type": "object", "description": "OpenAI response_format, e.g. {\"type\":\"json_object\"}."},
    "chat_template_kwargs": {"type": "object", "description": "Extra chat template arguments, e.g. {\"enable_thinking\": true}; lemonade_chat turns thinking off unless this sets it."}`

const modelProps = `
    "model": {"type": "string", "description": "Model id; omitted: a loaded model of the right type, else a downloaded one."},
    "allow_download": {"type": "boolean", "default": false, "description": "Allow downloading the default model when none is available."}`

const messagesProp = `
    "messages": {"type": "array", "minItems": 1, "description": "OpenAI chat messages.",
      "items": {"type": "object", "required": ["role"], "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}, {"type": "null"}]},
        "name": {"type": "string"},
        "tool_call_id": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object"}}}}}`

const listModelsSchema = `{"type": "object", "properties": {
    "include_available": {"type": "boolean", "default": true, "description": "Include downloaded models in the available list."},
    "include_suggested": {"type": "boolean", "default": true, "description": "Include suggested, not-yet-downloaded models in suggested_to_pull."}},
  "additionalProperties": false}`

const chatSchema = `{"type": "object", "required": ["messages"], "properties": {` + messagesProp + `,` + modelProps + `,` + samplingProps + `},
  "additionalProperties": false}`

const transcribeSchema = `{"type": "object", "properties": {` + modelProps + `,
    "audio_path": {"type": "string", "description": "Path of an audio file under the allowed audio root."},
    "audio_base64": {"type": "string", "contentEncoding": "base64", "description": "Audio file bytes in base64 (instead of audio_path)."},
    "filename": {"type": "string", "description": "File name hint for audio_base64 (its extension tells the format)."},
    "language": {"type": "string", "description": "ISO-639-1 language of the audio."},
    "prompt": {"type": "string", "description": "Text to guide the transcription."},
    "response_format": {"type": "string", "enum": ["json", "text", "verbose_json"], "description": "Format of the second text block (the full response); srt and vtt are refused: Zest's engines return no segment times."},
    "temperature": {"type": "number", "minimum": 0, "maximum": 1}},
  "oneOf": [{"required": ["audio_path"]}, {"required": ["audio_base64"]}],
  "additionalProperties": false}`

const imageSchema = `{"type": "object", "required": ["prompt"], "properties": {` + modelProps + `,
    "prompt": {"type": "string", "minLength": 1, "description": "What to draw."},
    "output_path": {"type": "string", "description": "File to write, inside the image directory."},
    "output_dir": {"type": "string", "description": "Directory to write into, inside the image directory."},
    "size": {"type": "string", "pattern": "^[0-9]+x[0-9]+$", "description": "WIDTHxHEIGHT, e.g. 512x512."},
    "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Number of images."},
    "negative_prompt": {"type": "string", "description": "What not to draw."},
    "seed": {"type": "integer"},
    "steps": {"type": "integer", "minimum": 1, "maximum": 200},
    "cfg_scale": {"type": "number", "minimum": 0, "maximum": 50}},
  "additionalProperties": false}`

const omniSchema = `{"type": "object", "required": ["messages"], "properties": {` + messagesProp + `,` + modelProps + `,
    "output_dir": {"type": "string", "description": "Directory for generated media, inside the image directory."},` + samplingProps + `},
  "additionalProperties": false}`

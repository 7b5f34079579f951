package lemonade

// Argument schemas of the MediaService tools (mediagen.go).

const outputProps = `
    "output_path": {"type": "string", "description": "File to write, inside the image directory."},
    "output_dir": {"type": "string", "description": "Directory to write into, inside the image directory."}`

const speechSchema = `{"type": "object", "required": ["input"], "properties": {` + modelProps + `,` + outputProps + `,
    "input": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "The text to speak."},
    "voice": {"type": "string", "description": "Voice name (engines without voices ignore it)."},
    "speed": {"type": "number", "minimum": 0.25, "maximum": 4, "description": "Speaking speed, 1.0 normal."},
    "response_format": {"type": "string", "enum": ["wav", "pcm", "mp3", "opus", "aac", "flac"], "description": "Audio container; the built-in engine writes wav or pcm."}},
  "additionalProperties": false}`

const audioGenSchema = `{"type": "object", "required": ["prompt"], "properties": {` + modelProps + `,` + outputProps + `,
    "prompt": {"type": "string", "minLength": 1, "description": "The music or sound effect to make."},
    "duration": {"type": "number", "exclusiveMinimum": 0, "maximum": 600, "description": "Length in seconds."},
    "lyrics": {"type": "string", "description": "Lyrics to sing, for engines that sing."},
    "seed": {"type": "integer"},
    "steps": {"type": "integer", "minimum": 1, "maximum": 200}},
  "additionalProperties": false}`

const editSchema = `{"type": "object", "required": ["prompt"], "properties": {` + modelProps + `,` + outputProps + `,
    "prompt": {"type": "string", "minLength": 1, "description": "The edit to make."},
    "image_path": {"type": "string", "description": "PNG to edit, inside the image directory."},
    "image_base64": {"type": "string", "contentEncoding": "base64", "description": "PNG to edit, in base64 (instead of image_path)."},
    "mask_path": {"type": "string", "description": "Mask PNG of the image's size, inside the image directory: transparent pixels are edited."},
    "mask_base64": {"type": "string", "contentEncoding": "base64", "description": "Mask PNG in base64 (instead of mask_path)."},
    "size": {"type": "string", "pattern": "^[0-9]+x[0-9]+$", "description": "WIDTHxHEIGHT of the output."},
    "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Number of images."},
    "seed": {"type": "integer"},
    "steps": {"type": "integer", "minimum": 1, "maximum": 200},
    "cfg_scale": {"type": "number", "minimum": 0, "maximum": 50}},
  "oneOf": [{"required": ["image_path"]}, {"required": ["image_base64"]}],
  "additionalProperties": false}`

const mesh3DSchema = `{"type": "object", "properties": {` + modelProps + `,` + outputProps + `,
    "prompt": {"type": "string", "description": "Without an image: what to draw as the 1024x1024 reference image first."},
    "image_path": {"type": "string", "description": "Picture to reconstruct, inside the image directory."},
    "image_base64": {"type": "string", "contentEncoding": "base64", "description": "Picture to reconstruct, in base64 (instead of image_path)."},
    "image_model": {"type": "string", "description": "Image model for the reference image; omitted: a loaded one."},
    "resolution": {"type": "integer", "enum": [512, 1024, 1536], "description": "Cascade resolution."},
    "seed": {"type": "integer"}},
  "anyOf": [{"required": ["prompt"]}, {"required": ["image_path"]}, {"required": ["image_base64"]}],
  "additionalProperties": false}`

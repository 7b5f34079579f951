package e2e

// builtinTools are the built-in tools of /mcp (the "lemonade" provider), sorted: the tests
// that count or list them read this one list, so a tool added is added here once.
var builtinTools = []string{
	"lemonade_chat",
	"lemonade_delete_model",
	"lemonade_edit_image",
	"lemonade_generate_3d",
	"lemonade_generate_audio",
	"lemonade_generate_image",
	"lemonade_list_models",
	"lemonade_load_model",
	"lemonade_omni",
	"lemonade_pull_model",
	"lemonade_text_to_speech",
	"lemonade_transcribe_audio",
	"lemonade_unload_model",
}

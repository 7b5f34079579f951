package openaiengine

import "github.com/zestmcp/zest/services/inference/modelfile"

// Config returns the model file's entry of model id (defaults applied), for showing it.
func (e *Engine) Config(id string) (modelfile.Model, bool) {
	m, ok := e.models[id]
	if !ok {
		return modelfile.Model{}, false
	}
	return m.Cfg, true
}

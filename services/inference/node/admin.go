package node

import (
	"bufio"
	"context"
	"errors"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	"github.com/zestmcp/zest/services/inference/openaiengine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Version is Zest's version, reported as lemond reports its own (health, system-info).
const Version = "0.1.0"

// admin serves ModelAdminService: model state and management. The built-in engine's models
// load, unload, download and delete at once (they are programs, not weights), and keep that
// state here; the engines' models are managed by their engine when it can (openaiengine's
// Manage), and their state is what the prober last saw.
type admin struct {
	inferencev1.UnimplementedModelAdminServiceServer
	n       *Node
	started time.Time

	mu      sync.Mutex
	state   map[string]inferencev1.ModelState // built-in models whose state changed from loaded
	lastUse map[string]time.Time              // model id → last load or request
	pinned  map[string]bool                   // model id → pinned (Pin)
	stats   inferencev1.StatsResponse         // last chat and totals
}

func newAdmin(n *Node) *admin {
	return &admin{n: n, started: time.Now(), state: map[string]inferencev1.ModelState{}, lastUse: map[string]time.Time{}, pinned: map[string]bool{}}
}

// overlay returns copies of models with the built-in models' state applied and Lemonade's
// capability labels added.
func (a *admin) overlay(models []*inferencev1.Model) []*inferencev1.Model {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*inferencev1.Model, 0, len(models))
	for _, m := range models {
		c := proto.Clone(m).(*inferencev1.Model)
		if s, ok := a.state[c.GetId()]; ok && c.GetEngine() == "builtin" {
			c.State = s
		}
		c.Labels = CapabilityLabels(c.GetType(), c.GetLabels())
		out = append(out, c)
	}
	return out
}

// touch notes a request for model id: a built-in model not loaded is loaded first (lemond
// loads a model on its first request too).
func (a *admin) touch(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.state, id) // loaded (the built-in default); no entry for engines' models anyway
	a.lastUse[id] = time.Now()
}

// deploymentLabels are Lemonade's deployment labels (docs/api/openai.md "Model Labels"): a
// model carries exactly one, and GUI3 lists only models that carry one.
var deploymentLabels = map[string]bool{"chat": true, "transcription": true, "embeddings": true, "embedding": true,
	"reranking": true, "image": true, "tts": true, "audio-generation": true, "classification": true, "classifier": true, "3d": true}

// CapabilityLabels returns labels with Lemonade's deployment label for the model type added
// when labels name none (a model file's own label wins), and an omni model's input labels.
func CapabilityLabels(t inferencev1.ModelType, labels []string) []string {
	out := append([]string(nil), labels...)
	has := func(l string) bool {
		for _, x := range out {
			if x == l {
				return true
			}
		}
		return false
	}
	declared := false
	for _, l := range out {
		declared = declared || deploymentLabels[l]
	}
	if d := deploymentLabel(t); d != "" && !declared {
		out = append(out, d)
	}
	if t == inferencev1.ModelType_MODEL_TYPE_OMNI {
		for _, l := range []string{"vision", "chat-transcription"} {
			if !has(l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// deploymentLabel maps a model type to Lemonade's deployment label, by the type's name so
// that types added to the enum later map without a change here when named as Lemonade names
// the mode.
func deploymentLabel(t inferencev1.ModelType) string {
	switch strings.TrimPrefix(t.String(), "MODEL_TYPE_") {
	case "LLM", "OMNI":
		return "chat"
	case "TRANSCRIPTION":
		return "transcription"
	case "IMAGE":
		return "image"
	case "TTS", "SPEECH":
		return "tts"
	case "EMBEDDING", "EMBEDDINGS":
		return "embeddings"
	case "RERANKING":
		return "reranking"
	case "AUDIO", "AUDIO_GENERATION", "MUSIC":
		return "audio-generation"
	case "THREE_D", "MODEL_3D", "MODEL3D", "MESH", "3D":
		return "3d"
	case "CLASSIFICATION":
		return "classification"
	}
	return ""
}

// loadedType is lemond's model type of a loaded model (all_models_loaded[].type).
func loadedType(labels []string) string {
	for _, l := range labels {
		switch l {
		case "chat":
			return "llm"
		case "embeddings", "embedding":
			return "embedding"
		case "3d":
			return "mesh"
		case "classifier":
			return "classification"
		case "transcription", "reranking", "image", "tts", "audio-generation", "classification":
			return l
		}
	}
	return "llm"
}

// find returns model id with its state, or NotFound.
func (a *admin) find(id string) (*inferencev1.Model, error) {
	for _, m := range a.n.all() {
		if m.GetId() == id {
			return m, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "model %q is not known; GET /api/v1/models?show_all=true lists the models", id)
}

// adminStatus maps management errors to gRPC codes: an engine without management is a
// request this node cannot do (InvalidArgument), the rest as every engine error.
func adminStatus(err error) error {
	if errors.Is(err, openaiengine.ErrNoManagement) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return toStatus(err)
}

func required(name string) error {
	if name == "" {
		return status.Error(codes.InvalidArgument, "model_name is required; GET /api/v1/models?show_all=true lists the models")
	}
	return nil
}

func (a *admin) setBuiltin(id string, s inferencev1.ModelState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s == inferencev1.ModelState_MODEL_STATE_LOADED {
		delete(a.state, id)
		a.lastUse[id] = time.Now()
		return
	}
	a.state[id] = s
}

// Load loads a model, installing it first if needed.
func (a *admin) Load(ctx context.Context, req *inferencev1.LoadRequest) (*inferencev1.LoadResponse, error) {
	if err := required(req.GetModelName()); err != nil {
		return nil, err
	}
	m, err := a.find(req.GetModelName())
	if err != nil {
		return nil, err
	}
	msg := "Loaded model: " + m.GetId()
	if m.GetEngine() == "builtin" {
		a.setBuiltin(m.GetId(), inferencev1.ModelState_MODEL_STATE_LOADED)
		return &inferencev1.LoadResponse{Message: msg}, nil
	}
	if _, err := a.n.openai.Manage(ctx, m.GetId(), openaiengine.OpLoad, req.GetOptions().AsMap(), nil); err != nil {
		return nil, adminStatus(err)
	}
	a.mu.Lock()
	a.lastUse[m.GetId()] = time.Now()
	a.mu.Unlock()
	return &inferencev1.LoadResponse{Message: msg}, nil
}

// Unload unloads one model, or every loaded model whose engine can unload it.
func (a *admin) Unload(ctx context.Context, req *inferencev1.UnloadRequest) (*inferencev1.UnloadResponse, error) {
	var targets []*inferencev1.Model
	if req.GetModelName() != "" {
		m, err := a.find(req.GetModelName())
		if err != nil {
			return nil, err
		}
		targets = append(targets, m)
	} else {
		for _, m := range a.n.all() {
			k := a.n.openai.Kind(m.GetId())
			if m.GetState() == inferencev1.ModelState_MODEL_STATE_LOADED && (m.GetEngine() == "builtin" || k == openaiengine.KindLemonade || k == openaiengine.KindOllama) {
				targets = append(targets, m)
			}
		}
	}
	out := &inferencev1.UnloadResponse{Message: "Model unloaded successfully"}
	for _, m := range targets {
		if m.GetEngine() == "builtin" {
			if m.GetState() == inferencev1.ModelState_MODEL_STATE_LOADED {
				a.setBuiltin(m.GetId(), inferencev1.ModelState_MODEL_STATE_AVAILABLE)
			}
		} else if _, err := a.n.openai.Manage(ctx, m.GetId(), openaiengine.OpUnload, nil, nil); err != nil {
			return nil, adminStatus(err)
		}
		out.ModelNames = append(out.ModelNames, m.GetId())
	}
	return out, nil
}

// Pull downloads a model, streaming the engine's progress; the last message has complete set.
func (a *admin) Pull(req *inferencev1.PullRequest, stream inferencev1.ModelAdminService_PullServer) error {
	if err := required(req.GetModelName()); err != nil {
		return err
	}
	m, err := a.find(req.GetModelName())
	if err != nil {
		return err
	}
	done := "Installed model: " + m.GetId()
	if m.GetEngine() == "builtin" {
		// Nothing to download: one event for the program "file", then the end.
		if m.GetState() == inferencev1.ModelState_MODEL_STATE_SUGGESTED {
			a.setBuiltin(m.GetId(), inferencev1.ModelState_MODEL_STATE_AVAILABLE)
		}
		if err := stream.Send(&inferencev1.PullResponse{File: m.GetId(), FileIndex: 1, TotalFiles: 1, Percent: 100, Message: "built in"}); err != nil {
			return err
		}
		return stream.Send(&inferencev1.PullResponse{FileIndex: 1, TotalFiles: 1, Percent: 100, Message: done, Complete: true})
	}
	msg, err := a.n.openai.Manage(stream.Context(), m.GetId(), openaiengine.OpPull, req.GetOptions().AsMap(), func(p openaiengine.Progress) error {
		return stream.Send(&inferencev1.PullResponse{File: p.File, FileIndex: int32(p.FileIndex), TotalFiles: int32(p.TotalFiles),
			BytesDownloaded: p.BytesDownloaded, BytesTotal: p.BytesTotal, Percent: p.Percent, Message: p.Message})
	})
	if err != nil {
		return adminStatus(err)
	}
	if msg == "" {
		msg = done
	}
	return stream.Send(&inferencev1.PullResponse{Percent: 100, Message: msg, Complete: true})
}

// Delete removes a model from its engine's storage (a built-in model becomes suggested: it
// is listed with show_all, and pull or load brings it back).
func (a *admin) Delete(ctx context.Context, req *inferencev1.DeleteRequest) (*inferencev1.DeleteResponse, error) {
	if err := required(req.GetModelName()); err != nil {
		return nil, err
	}
	m, err := a.find(req.GetModelName())
	if err != nil {
		return nil, err
	}
	if m.GetEngine() == "builtin" {
		a.setBuiltin(m.GetId(), inferencev1.ModelState_MODEL_STATE_SUGGESTED)
	} else if _, err := a.n.openai.Manage(ctx, m.GetId(), openaiengine.OpDelete, nil, nil); err != nil {
		return nil, adminStatus(err)
	}
	return &inferencev1.DeleteResponse{Message: "Deleted model: " + m.GetId()}, nil
}

// LoadedModels lists the loaded models, most recently used first.
func (a *admin) LoadedModels(context.Context, *inferencev1.LoadedModelsRequest) (*inferencev1.LoadedModelsResponse, error) {
	out := &inferencev1.LoadedModelsResponse{Version: Version}
	for _, m := range a.n.all() {
		if m.GetState() != inferencev1.ModelState_MODEL_STATE_LOADED {
			continue
		}
		a.mu.Lock()
		t, ok := a.lastUse[m.GetId()]
		pinned := a.pinned[m.GetId()]
		a.mu.Unlock()
		if !ok {
			t = a.started // loaded since start (the built-in models) or by the engine itself
		}
		lm := &inferencev1.LoadedModel{ModelName: m.GetId(), LastUse: float64(t.UnixMicro()) / 1e6, Type: loadedType(m.GetLabels()), Labels: m.GetLabels(), Pinned: pinned}
		if m.GetEngine() == "builtin" {
			lm.Checkpoint, lm.Device, lm.Recipe = m.GetId(), "cpu", "builtin"
		} else {
			lm.Checkpoint, lm.Recipe, lm.BackendUrl = a.n.openai.UpstreamModel(m.GetId()), a.n.openai.Kind(m.GetId()), a.n.openai.BaseURL(m.GetId())
		}
		out.Models = append(out.Models, lm)
	}
	sort.SliceStable(out.Models, func(i, j int) bool { return out.Models[i].GetLastUse() > out.Models[j].GetLastUse() })
	if len(out.Models) > 0 {
		out.ModelLoaded = out.Models[0].GetModelName()
	}
	return out, nil
}

// Pin marks a known model pinned or not, as lemond's /internal/pin does; the mark shows in
// LoadedModels. Zest evicts no model, so the mark changes nothing else (as a pin in lemond
// with auto_evict off). It lives as long as this node, as lemond's does as long as its process.
func (a *admin) Pin(_ context.Context, req *inferencev1.PinRequest) (*inferencev1.PinResponse, error) {
	if err := required(req.GetModelName()); err != nil {
		return nil, err
	}
	m, err := a.find(req.GetModelName())
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if req.GetPinned() {
		a.pinned[m.GetId()] = true
	} else {
		delete(a.pinned, m.GetId())
	}
	a.mu.Unlock()
	return &inferencev1.PinResponse{ModelName: m.GetId(), Pinned: req.GetPinned()}, nil
}

// maxDecodeTimes bounds the per-token times kept of the last chat.
const maxDecodeTimes = 1024

// observe wraps a chat's send to measure it for Stats: time to the first content chunk, the
// times between content chunks, and the usage of the last chunk (the count of content chunks
// when the engine gave none).
func (a *admin) observe(send func(*inferencev1.ChatResponse) error) func(*inferencev1.ChatResponse) error {
	start := time.Now()
	var first, prev time.Time
	var times []float64
	var chunks int64
	return func(c *inferencev1.ChatResponse) error {
		now := time.Now()
		if c.GetDelta().GetContent() != "" || len(c.GetDelta().GetToolCalls()) > 0 {
			if first.IsZero() {
				first = now
			} else if len(times) < maxDecodeTimes {
				times = append(times, now.Sub(prev).Seconds())
			}
			prev = now
			chunks++
		}
		if c.GetFinishReason() != "" {
			in, outTok := int64(c.GetUsage().GetPromptTokens()), int64(c.GetUsage().GetCompletionTokens())
			if c.GetUsage() == nil {
				outTok = chunks
			}
			if first.IsZero() {
				first = now
			}
			var tps float64
			if d := now.Sub(first).Seconds(); d > 0 {
				tps = float64(outTok) / d
			}
			a.mu.Lock()
			s := &a.stats
			s.TimeToFirstToken, s.TokensPerSecond = first.Sub(start).Seconds(), tps
			s.InputTokens, s.OutputTokens, s.PromptTokens, s.DecodeTokenTimes = in, outTok, in, times
			s.RequestCountTotal++
			s.InputTokensTotal += in
			s.OutputTokensTotal += outTok
			s.PromptTokensTotal += in
			a.mu.Unlock()
		}
		return send(c)
	}
}

// Stats reports the last chat and the totals since start.
func (a *admin) Stats(context.Context, *inferencev1.StatsRequest) (*inferencev1.StatsResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return proto.Clone(&a.stats).(*inferencev1.StatsResponse), nil
}

// SystemInfo describes the host from /proc and /etc/os-release where there are (Linux); the
// recipes are the engine kinds this node serves models with.
func (a *admin) SystemInfo(context.Context, *inferencev1.SystemInfoRequest) (*inferencev1.SystemInfoResponse, error) {
	out := &inferencev1.SystemInfoResponse{Version: Version, OsVersion: osVersion(), CpuThreads: int32(runtime.NumCPU()), CpuFamily: cpuFamily()}
	out.Processor, out.CpuCores = cpuInfo()
	out.PhysicalMemoryBytes = memTotal()
	out.Recipes = append(out.Recipes, &inferencev1.Recipe{Name: "builtin", DefaultBackend: "default", Backends: []*inferencev1.RecipeBackend{
		{Name: "default", Devices: []string{"cpu"}, State: "installed", Version: Version}}})
	kinds := map[string]bool{}
	for _, m := range a.n.openai.Models() {
		kinds[a.n.openai.Kind(m.GetId())] = true
	}
	for _, k := range []string{openaiengine.KindLemonade, openaiengine.KindOllama, openaiengine.KindOpenAI} {
		if kinds[k] {
			out.Recipes = append(out.Recipes, &inferencev1.Recipe{Name: k, DefaultBackend: "default", Backends: []*inferencev1.RecipeBackend{
				{Name: "default", Devices: []string{}, State: "installed", Message: "a server of the model file (ZEST_MODELS_FILE); its devices are its own"}}})
		}
	}
	return out, nil
}

func osVersion() string {
	if f, err := os.Open("/etc/os-release"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				return runtime.GOOS + " " + strings.Trim(v, `"`)
			}
		}
	}
	return runtime.GOOS
}

func cpuFamily() string {
	if runtime.GOARCH == "amd64" {
		return "x86_64"
	}
	return runtime.GOARCH
}

// cpuInfo reads the CPU's name and physical core count from /proc/cpuinfo.
func cpuInfo() (name string, cores int32) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH + " CPU", 0
	}
	defer f.Close()
	phys := map[string]bool{}
	var physID string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			if name == "" {
				name = v
			}
		case "physical id":
			physID = v
		case "core id":
			phys[physID+"/"+v] = true
		}
	}
	if name == "" {
		name = runtime.GOARCH + " CPU"
	}
	return name, int32(len(phys))
}

// memTotal reads the RAM size from /proc/meminfo (0 when unknown).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

package edge

// The routes Lemonade's GUI (GUI3) calls on lemond that are about lemond itself rather
// than about models: its runtime settings, downloads, machine load, slots, log level, a
// model's load options, and its two WebSockets. Each answers in Lemonade's shape what is
// true of Zest, or a JSON error that says why not and how Zest does it instead.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/zestmcp/zest/gateway/httpguard"
	"github.com/zestmcp/zest/gateway/logstream"
	"github.com/zestmcp/zest/gateway/openai"
	"github.com/zestmcp/zest/lib/logging"
	inferencev1 "github.com/zestmcp/zest/proto/gen/zest/inference/v1"
	mcpgatewayv1 "github.com/zestmcp/zest/proto/gen/zest/mcpgateway/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// maxSettingsBody caps the JSON bodies of internal/set, log-level and downloads/control:
// a few settings, not a payload.
const maxSettingsBody = 64 << 10

// lemond serves the routes.
type lemond struct {
	cfg Config
	log *slog.Logger
	// audit records a change of the edge's settings in mcpgateway's audit trail (the edge keeps
	// no state of its own): AdminService.RecordEdgeChange, with the administrator's key.
	audit interface {
		RecordEdgeChange(ctx context.Context, in *mcpgatewayv1.RecordEdgeChangeRequest, opts ...grpc.CallOption) (*mcpgatewayv1.RecordEdgeChangeResponse, error)
	}
	streams int             // the bound in all on MCP streams, as the open-file limit left it (streamsInAll)
	guard   httpguard.Guard // the key checks of the WebSockets (their upgrade and auth message)
	infer   inferencev1.InferenceServiceClient
	options inferencev1.ModelOptionsServiceClient
	models  inferencev1.ModelAdminServiceClient
	logs    *logstream.Hub
	cpu     cpuSampler
	held    holds // the WebSockets' slots, in the table of the MCP streams
}

// registerLemond adds the routes under each prefix and at the root paths GUI3 uses
// (/internal/config, /internal/set, /logs/stream, /spans/stream), each wrapped by api (CORS,
// API key, body limit) — or, for the edge's own settings (/internal/config, /internal/set,
// POST log-level), by admin (the admin key once one is set, as lemond asks on /internal/*) —
// but the WebSockets, which check the key themselves (a browser cannot send a header on an
// upgrade: GUI3 puts it in ?api_key=).
func (l *lemond) register(mux *http.ServeMux, api, admin func(http.Handler) http.Handler, cors func(http.Handler) http.Handler) {
	small := func(guard func(http.Handler) http.Handler, h http.HandlerFunc) http.Handler {
		return guard(httpguard.LimitBody(maxSettingsBody, openai.WriteError, h))
	}
	// GET log-level reads, with the API key; POST sets, with the admin key.
	logLevel := byMethod(map[string]http.Handler{http.MethodPost: small(admin, l.logLevel)}, small(api, l.logLevel))
	for _, p := range Prefixes {
		mux.Handle(p+"downloads", api(httpguard.GetOnly(http.HandlerFunc(l.downloads))))
		mux.Handle(p+"downloads/control", small(api, post(l.downloadControl)))
		mux.Handle(p+"system-stats", api(httpguard.GetOnly(http.HandlerFunc(l.systemStats))))
		mux.Handle(p+"slots", api(httpguard.GetOnly(http.HandlerFunc(l.slots))))
		mux.Handle(p+"log-level", logLevel)
		mux.Handle(p+"models/{id}/options", api(http.HandlerFunc(l.modelOptions)))
		mux.Handle(p+"models/{id}/files", api(httpguard.GetOnly(http.HandlerFunc(l.modelFiles))))
		mux.Handle(p+"models/{id}/runtime", api(httpguard.GetOnly(http.HandlerFunc(l.modelRuntime))))
		mux.Handle(p+"load/command", small(api, post(l.loadCommand)))
		mux.Handle(p+"logs/stream", cors(http.HandlerFunc(l.logStream)))
		mux.Handle(p+"spans/stream", cors(http.HandlerFunc(l.spanStream)))
		mux.Handle(p+"docs", api(httpguard.GetOnly(http.HandlerFunc(docsIndex))))
		mux.Handle(p+"docs/{page...}", api(httpguard.GetOnly(http.HandlerFunc(docsPage))))
	}
	l.registerUnsupported(mux, func(h http.HandlerFunc) http.Handler { return api(h) },
		func(h http.HandlerFunc) http.Handler { return small(api, h) }, cors)
	mux.Handle("/internal/config", admin(httpguard.GetOnly(http.HandlerFunc(l.config))))
	mux.Handle("/internal/set", small(admin, post(l.set)))
	mux.Handle("/internal/pin", small(admin, post(l.pin)))
	mux.Handle("/logs/stream", cors(http.HandlerFunc(l.logStream)))
	mux.Handle("/spans/stream", cors(http.HandlerFunc(l.spanStream)))
}

// byMethod serves each method its handler, and any other method def.
func byMethod(by map[string]http.Handler, def http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := by[r.Method]; ok {
			h.ServeHTTP(w, r)
			return
		}
		def.ServeHTTP(w, r)
	})
}

// record asks mcpgateway to record a change of the edge's settings in the audit trail, before
// it applies: false means it could not, the change is not applied, and the answer (503) is
// written. With no admin key configured there is no administrator to name and the trail is
// closed to every caller: the change is logged only.
func (l *lemond) record(w http.ResponseWriter, r *http.Request, settings ...string) bool {
	if l.cfg.Keys.AdminKey() == "" {
		l.log.WarnContext(r.Context(), "edge settings changed without a key configured: not in the audit trail", "settings", settings)
		return true
	}
	_, err := l.audit.RecordEdgeChange(forwardAuth(r), &mcpgatewayv1.RecordEdgeChangeRequest{Edge: l.edgeName(), Settings: settings})
	if err != nil {
		st := status.Convert(err)
		l.log.WarnContext(r.Context(), "edge settings change not applied: the audit trail did not record it", "settings", settings, "code", st.Code().String(), "err", st.Message())
		openai.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("The change was not applied: mcpgateway, which keeps the audit trail, did not record it (%s: %s); try again", st.Code(), st.Message()))
		return false
	}
	return true
}

// edgeName names this edge in the audit trail: its host and listen address (each replica has
// its own settings).
func (l *lemond) edgeName() string {
	if h, err := os.Hostname(); err == nil {
		return h + "/" + l.cfg.Addr
	}
	return l.cfg.Addr
}

func post(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			openai.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Use POST for this endpoint")
			return
		}
		h(w, r)
	}
}

// readObject reads a JSON object body; false means the answer (400/413) is written.
func readObject(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	b, err := httpguard.ReadBody(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			openai.WriteParamError(w, http.StatusRequestEntityTooLarge, "", httpguard.TooLargeMessage(tooBig.Limit))
		} else {
			openai.WriteParamError(w, http.StatusBadRequest, "", "could not read the body: the connection ended before it did")
		}
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		openai.WriteParamError(w, http.StatusBadRequest, "", "the body must be a JSON object")
		return nil, false
	}
	return m, true
}

// ---- internal/config and internal/set ----

// settable are the keys internal/set changes while Zest runs.
var settable = map[string]bool{"log_level": true}

// setting is a key of lemond's configuration that Zest shows in GET /internal/config but does
// not change through /internal/set: either the edge reads it at start (env names the variable
// and flag), or Zest has one value only and why says what it does instead. Setting a key to
// the value it has is accepted and changes nothing (GUI3's Settings save every key of a
// section, changed or not).
type setting struct {
	env  string
	why  string
	same []any // other spellings of the value it has (GUI3 sends models_dir "auto" for none)
}

// settings are the keys of GET /internal/config that /internal/set does not change.
var settings = map[string]setting{
	"host":                 {env: "ZEST_EDGE_ADDR (--edge-addr)"},
	"port":                 {env: "ZEST_EDGE_ADDR (--edge-addr)"},
	"log_format":           {env: "ZEST_LOG_FORMAT (--log-format)"},
	"max_body_bytes":       {env: "ZEST_MAX_BODY_BYTES (--max-body-bytes)"},
	"max_admin_body_bytes": {env: "ZEST_MAX_ADMIN_BODY_BYTES (--max-admin-body-bytes)"},
	"body_read_timeout":    {env: "ZEST_BODY_READ_TIMEOUT (--body-read-timeout)"},
	"idle_timeout":         {env: "ZEST_IDLE_TIMEOUT (--idle-timeout)"},
	"drain_timeout":        {env: "ZEST_DRAIN_TIMEOUT (--drain-timeout)"},
	"allowed_origins":      {env: "LEMONADE_ALLOWED_ORIGINS"},
	"api_key_set":          {env: "LEMONADE_API_KEY"},
	"admin_api_key_set":    {env: "LEMONADE_ADMIN_API_KEY"},
	"mcpgateway_addr":      {env: "ZEST_MCPGATEWAY_ADDR (--mcpgateway-addr)"},
	"inference_addr":       {env: "ZEST_INFERENCE_ADDR (--inference-addr)"},
	"toolhost_addr":        {env: "ZEST_TOOLHOST_ADDR (--toolhost-addr)"},
	"streams_per_session":  {env: "ZEST_STREAMS_PER_SESSION (--streams-per-session)"},
	"streams_per_key":      {env: "ZEST_STREAMS_PER_KEY (--streams-per-key)"},
	"max_streams":          {env: "ZEST_MAX_STREAMS (--max-streams; the open-file limit bounds it too)"},
	"models_dir": {same: []any{"auto"}, why: "Zest keeps no model directory: each model is an entry of the inference node's model file " +
		"(ZEST_MODELS_FILE), and its engine holds the model's files"},
	"extra_models_dir": {why: "Zest keeps no model directory: each model is an entry of the inference node's model file " +
		"(ZEST_MODELS_FILE), and its engine holds the model's files"},
	"max_loaded_models":        {why: "Zest caps no model type: every model of the model file stays loaded until POST /api/v1/unload unloads it (-1 is lemond's \"unlimited\")"},
	"auto_evict":               {why: "Zest never evicts a model to make room: unload one with POST /api/v1/unload"},
	"auto_evict_threshold_pct": {why: "Zest never evicts a model, so it has no eviction threshold: unload one with POST /api/v1/unload"},
	"auto_check_model_updates": {why: "Zest checks no model for updates: its engines hold their models (pull a newer one with POST /api/v1/pull where the engine can)"},
}

// setRefusal says why key cannot become the value asked for, and what to do instead.
func setRefusal(key string) string {
	const only = " Only log_level is changed here."
	s, ok := settings[key]
	switch {
	case !ok:
		return fmt.Sprintf("'%s' is not a Zest setting: GET /internal/config lists those Zest has.%s", key, only)
	case s.env != "":
		return fmt.Sprintf("'%s' cannot change while Zest runs: the edge reads it at start from %s; set it there and restart the edge.%s", key, s.env, only)
	default:
		return fmt.Sprintf("'%s' cannot change on Zest: %s.%s", key, s.why, only)
	}
}

// unchanged says whether raw is the value key has (snapshot) or one of its other spellings.
func unchanged(key string, raw json.RawMessage, now map[string]any) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	cur, ok := now[key]
	if !ok {
		return false
	}
	b, _ := json.Marshal(cur)
	var c any
	_ = json.Unmarshal(b, &c) // the snapshot's value as JSON decodes it (numbers as float64)
	if reflect.DeepEqual(v, c) {
		return true
	}
	for _, s := range settings[key].same {
		if reflect.DeepEqual(v, s) {
			return true
		}
	}
	return false
}

func (l *lemond) snapshot() map[string]any {
	host, port, _ := net.SplitHostPort(l.cfg.Addr)
	p, _ := strconv.Atoi(port)
	origins := l.cfg.AllowedOrigins
	if origins == nil {
		origins = []string{}
	}
	return map[string]any{
		"log_level":            logstream.Severity(l.logs.Level().Level()),
		"log_format":           l.cfg.LogFormat,
		"host":                 host,
		"port":                 p,
		"max_body_bytes":       l.cfg.MaxBodyBytes,
		"max_admin_body_bytes": l.cfg.MaxAdminBodyBytes,
		"body_read_timeout":    l.cfg.BodyReadTimeout.String(),
		"idle_timeout":         l.cfg.IdleTimeout.String(),
		"drain_timeout":        l.cfg.DrainTimeout.String(),
		"allowed_origins":      origins,
		"api_key_set":          l.cfg.Keys.API != "",
		"admin_api_key_set":    l.cfg.Keys.AdminKey() != "",
		"mcpgateway_addr":      l.cfg.McpgatewayAddr,
		"inference_addr":       l.cfg.InferenceAddr,
		"toolhost_addr":        l.cfg.ToolhostAddr,
		"streams_per_session":  l.cfg.StreamsPerSession,
		"streams_per_key":      l.cfg.StreamsPerKey,
		"max_streams":          l.streams,
		"models_dir":           "",
		"extra_models_dir":     "",
		// Zest caps no type and never evicts a model (lemond's memory settings, which GUI3's
		// Settings → Memory reads: -1 is lemond's "unlimited"), and checks no model for
		// updates (Settings → Updates).
		"max_loaded_models":        -1,
		"auto_evict":               false,
		"auto_evict_threshold_pct": 0.9,
		"auto_check_model_updates": false,
	}
}

// config answers GET /internal/config: Zest's effective settings, flat as Lemonade's.
func (l *lemond) config(w http.ResponseWriter, _ *http.Request) {
	httpguard.WriteJSON(w, http.StatusOK, l.snapshot())
}

// set answers POST /internal/set as Lemonade does ({"status":"success","updated":{…}}),
// checking every key before applying any: log_level changes; another key of
// GET /internal/config is accepted when it keeps the value it has (GUI3 saves a whole section
// of its Settings at once) and refused otherwise with a 400 that names it, says why Zest does
// not change it and where it is set, if anywhere; a key Zest does not have is a 400 too.
func (l *lemond) set(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r)
	if !ok {
		return
	}
	if len(body) == 0 {
		openai.WriteParamError(w, http.StatusBadRequest, "", "the body must be a non-empty JSON object of settings; settable here: log_level")
		return
	}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := l.snapshot()
	updated := map[string]any{}
	var level *slog.Level
	for _, k := range keys {
		if !settable[k] {
			if !unchanged(k, body[k], now) {
				openai.WriteParamError(w, http.StatusBadRequest, k, setRefusal(k))
				return
			}
			updated[k] = now[k]
			continue
		}
		var s string
		if json.Unmarshal(body[k], &s) != nil {
			openai.WriteParamError(w, http.StatusBadRequest, k, "'log_level' must be a string: trace, debug, info, warning, error or fatal")
			return
		}
		lv, ok := logstream.ParseLevel(s)
		if !ok {
			openai.WriteParamError(w, http.StatusBadRequest, k, fmt.Sprintf("'log_level' %q: use trace, debug, info, warning, error or fatal", s))
			return
		}
		level = &lv
		updated[k] = logstream.Severity(lv)
	}
	if level != nil {
		if !l.record(w, r, "log_level") {
			return
		}
		l.logs.Level().Set(*level)
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"status": "success", "updated": updated})
}

// logLevel answers POST {prefix}log-level {"level":…} as Lemonade does ({"status":"success",
// "level":…}), and GET with the current level (Zest's addition). The level is the edge's:
// each Zest service is its own process, started at ZEST_LOG_LEVEL.
func (l *lemond) logLevel(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		httpguard.WriteJSON(w, http.StatusOK, map[string]any{"level": logstream.Severity(l.logs.Level().Level())})
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		openai.WriteError(w, http.StatusMethodNotAllowed, "Method Not Allowed. Use GET or POST for this endpoint")
		return
	}
	body, ok := readObject(w, r)
	if !ok {
		return
	}
	raw, present := body["level"]
	var s string
	if !present || json.Unmarshal(raw, &s) != nil {
		openai.WriteParamError(w, http.StatusBadRequest, "level", "'level' is required, a string: trace, debug, info, warning, error or fatal")
		return
	}
	lv, ok := logstream.ParseLevel(s)
	if !ok {
		openai.WriteParamError(w, http.StatusBadRequest, "level", fmt.Sprintf("'level' %q: use trace, debug, info, warning, error or fatal", s))
		return
	}
	if !l.record(w, r, "log_level") {
		return
	}
	l.logs.Level().Set(lv)
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"status": "success", "level": logstream.Severity(lv)})
}

// ---- downloads ----

// downloads answers GET {prefix}downloads: Zest downloads no model itself (engines are
// OpenAI-compatible servers that hold their own models), so the list is always empty.
func (l *lemond) downloads(w http.ResponseWriter, _ *http.Request) {
	httpguard.WriteJSON(w, http.StatusOK, []any{})
}

// downloadControl answers POST {prefix}downloads/control {"id","action"} as Lemonade answers
// an id it does not know: "remove" is {"status":"ok","missing":true}, "pause" and "cancel"
// are 404; a missing id or action, or another action, is 400.
func (l *lemond) downloadControl(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r)
	if !ok {
		return
	}
	var id, action string
	for _, f := range []struct {
		name string
		dst  *string
	}{{"id", &id}, {"action", &action}} {
		raw, present := body[f.name]
		if !present || json.Unmarshal(raw, f.dst) != nil || *f.dst == "" {
			openai.WriteParamError(w, http.StatusBadRequest, f.name, fmt.Sprintf("'%s' is required, a non-empty string (both 'id' and 'action' are)", f.name))
			return
		}
	}
	switch action {
	case "remove":
		httpguard.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "missing": true})
	case "pause", "cancel":
		openai.WriteParamError(w, http.StatusNotFound, "id", fmt.Sprintf("Download not found: %q (Zest downloads no models itself: GET downloads is always empty)", id))
	default:
		openai.WriteParamError(w, http.StatusBadRequest, "action", fmt.Sprintf("Unsupported download action %q: use pause, cancel or remove", action))
	}
}

// ---- system-stats ----

// systemStats answers GET {prefix}system-stats: the machine's CPU use since the previous
// call (since the edge started, on the first) and memory in use, from /proc; null where
// the machine does not say (no /proc) and for GPU, VRAM and NPU, which Zest does not read.
func (l *lemond) systemStats(w http.ResponseWriter, _ *http.Request) {
	out := map[string]any{"cpu_percent": nil, "memory_gb": nil, "gpu_percent": nil, "vram_gb": nil, "npu_percent": nil}
	if p, ok := l.cpu.percent(); ok {
		out["cpu_percent"] = p
	}
	if gb, ok := memoryUsedGB(); ok {
		out["memory_gb"] = gb
	}
	httpguard.WriteJSON(w, http.StatusOK, out)
}

// cpuSampler keeps the previous /proc/stat totals, to give the use between two samples.
type cpuSampler struct {
	mu          sync.Mutex
	total, idle uint64
	path        string // /proc/stat; a test may point it elsewhere
}

func (c *cpuSampler) percent() (float64, bool) {
	path := c.path
	if path == "" {
		path = "/proc/stat"
	}
	total, idle, ok := readCPU(path)
	if !ok {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pt, pi := c.total, c.idle
	c.total, c.idle = total, idle
	if pt == 0 || total <= pt {
		return 0, true // the first sample, or no tick since the last: no use to measure
	}
	dt, di := total-pt, idle-pi
	if di > dt {
		di = dt
	}
	return math.Round(float64(dt-di)*1000/float64(dt)) / 10, true
}

// readCPU reads the aggregate "cpu" line of /proc/stat: all ticks, and idle + iowait.
func readCPU(path string) (total, idle uint64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	// user nice system idle iowait irq softirq steal (guest time is already in user).
	for i, s := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total, idle, true
}

// memoryUsedGB is MemTotal − MemAvailable of /proc/meminfo in GiB, to one decimal, as
// lemond reports it.
func memoryUsedGB() (float64, bool) { return memoryUsedGBFrom("/proc/meminfo") }

func memoryUsedGBFrom(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var total, avail int64 = -1, -1
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	if total < 0 || avail < 0 {
		return 0, false
	}
	return math.Round(float64(total-avail)/(1024*1024)*10) / 10, true
}

// ---- slots ----

// slots answers GET {prefix}slots in the shape of llama.cpp's /slots that lemond relays:
// one slot per engine replica, processing while it has requests in flight. Zest does not
// see inside an engine, so token counts and timings are 0; in_flight, base_url and healthy
// are Zest's additions. Built-in engines have no replicas and no slots.
func (l *lemond) slots(w http.ResponseWriter, r *http.Request) {
	reps, err := l.infer.ListReplicas(forwardAuth(r), &inferencev1.ListReplicasRequest{})
	if err != nil {
		openai.WriteStatus(w, err)
		return
	}
	out := []map[string]any{}
	for i, rp := range reps.GetReplicas() {
		state := 0
		if rp.GetInFlight() > 0 {
			state = 1
		}
		out = append(out, map[string]any{
			"id": i, "model": rp.GetModel(), "n_ctx": 0, "n_decoded": 0, "n_prompt_tokens": 0,
			"n_prompt_tokens_processed": 0, "state": state, "is_processing": rp.GetInFlight() > 0,
			"temperature": 0, "top_k": 0, "top_p": 0, "cache_tokens": []int{}, "n_cache_tokens": 0,
			"timings": map[string]any{"prompt_n": 0, "prompt_ms": 0, "prompt_per_token_ms": 0, "prompt_per_second": 0,
				"predicted_n": 0, "predicted_ms": 0, "predicted_per_token_ms": 0, "predicted_per_second": 0},
			"prompt": "", "truncated": false, "stopped_eos": false, "stopped_word": false, "stopped_limit": false,
			"in_flight": rp.GetInFlight(), "base_url": rp.GetBaseUrl(), "healthy": rp.GetHealthy(),
		})
	}
	httpguard.WriteJSON(w, http.StatusOK, out)
}

// ---- models/{id}/options ----

// modelOptions answers GET {prefix}models/{id}/options in Lemonade's shape from the model
// file: saved and effective are the model's entry (upstream_model, type, max_concurrency,
// timeout, base_urls; nothing for a built-in model), defaults what the file gives an entry
// that leaves a setting out. Zest loads no model with recipe options (an engine runs its
// models as it was started), so the context size is unknown (-1, Lemonade's "auto"); an
// unknown model is 404 as on GET models/{id}. Saving or resetting options (POST, DELETE) is
// 405: a Zest model's settings are its entry in the inference node's model file.
func (l *lemond) modelOptions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		openai.WriteError(w, http.StatusMethodNotAllowed, "Zest models have no saved load options: a model's settings are its entry in the inference node's model file (ZEST_MODELS_FILE); use GET")
		return
	}
	resp, err := l.options.GetModelOptions(forwardAuth(r), &inferencev1.GetModelOptionsRequest{Id: r.PathValue("id")})
	if err != nil {
		openai.WriteStatus(w, err)
		return
	}
	opts := resp.GetOptions().AsMap()
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{
		"model_name": resp.GetId(), "recipe": resp.GetEngine(),
		"saved": opts, "effective": opts, "defaults": resp.GetDefaults().AsMap(),
		"resolved_ctx_size": -1, "load_command": l.loadCurl(resp.GetId()),
	})
}

// levelOf is the level of the logger the service made (lib/logging), which /internal/set
// and log-level change; for another logger, a new level at the lowest it writes.
func levelOf(log *slog.Logger) *slog.LevelVar {
	if lv := logging.LevelOf(log); lv != nil {
		return lv
	}
	lv := new(slog.LevelVar)
	for _, l := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if log.Enabled(context.Background(), l) {
			lv.Set(l)
			break
		}
	}
	return lv
}

package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// A session key as ZEST_SESSION_KEY takes it (base64url of 32 bytes); the tests only pass it on.
const testSessionKey = "c2Vzc2lvbi1rZXktZm9yLWRlcGxveS10ZXN0cy0zMmI"

var haEnv = append(slices.Clone(composeEnv), "ZEST_SESSION_KEY="+testSessionKey)

// haAdded names the variables a replica of compose.ha.yaml has beyond its service in
// compose.yaml (other than the addresses it dials, which become lists).
var haAdded = map[string][]string{
	"mcpgateway": {"ZEST_REGISTRY"},
	"toolhost":   {"ZEST_TOOLHOST_NAME"},
}

// kindOf maps a service of compose.ha.yaml to what it is a replica of: gateway-a → gateway,
// etcd-0 → etcd.
func kindOf(name string) string {
	return regexp.MustCompile(`-([a-z]|[0-9]+)$`).ReplaceAllString(name, "")
}

func loadHA(t *testing.T, env []string, profiles ...string) *types.Project {
	t.Helper()
	p, err := loadComposeFile(t, "compose.ha.yaml", env, profiles...)
	if err != nil {
		t.Fatalf("compose.ha.yaml does not load: %v", err)
	}
	return p
}

// byKind groups a project's services by kindOf, each group sorted.
func byKind(p *types.Project) map[string][]string {
	out := map[string][]string{}
	for _, n := range slices.Sorted(maps.Keys(p.Services)) {
		out[kindOf(n)] = append(out[kindOf(n)], n)
	}
	return out
}

// list is the comma-separated host:port list of the services named, on one port.
func list(names []string, port uint32) string {
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s:%d", n, port))
	}
	return strings.Join(out, ",")
}

// Two of every Zest service, three etcd members; each replica is its service of
// compose.yaml (image, build target, user, health check, read-only root, no capabilities,
// its other settings) with every address it dials listing every replica of what it calls.
func TestComposeHAServices(t *testing.T) {
	ha := loadHA(t, haEnv, "engine")
	base, err := loadCompose(t, haEnv, "engine")
	if err != nil {
		t.Fatal(err)
	}
	if ha.Name != "zest-ha" {
		t.Errorf("project name %q, want zest-ha (apart from compose.yaml's containers and volumes)", ha.Name)
	}
	kinds := byKind(ha)
	for kind, n := range map[string]int{"gateway": 2, "mcpgateway": 2, "inference": 2, "toolhost": 2, "etcd": 3, "engine": 1} {
		if len(kinds[kind]) != n {
			t.Errorf("%s: %v, want %d", kind, kinds[kind], n)
		}
	}
	if len(kinds) != 6 {
		t.Errorf("services %v: want only gateway, mcpgateway, inference, toolhost, etcd and engine", kinds)
	}
	for name, svc := range ha.Services {
		kind := kindOf(name)
		hc := svc.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
			t.Errorf("%s: no health check in exec form", name)
		} else if hc.Timeout == nil || *hc.Timeout <= types.Duration(3e9) || hc.Interval == nil || hc.Retries == nil {
			t.Errorf("%s: health check without explicit interval, retries and a timeout above the probe's own 3 s", name)
		}
		if !svc.ReadOnly || !slices.Contains(svc.CapDrop, "ALL") || !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: want read_only, cap_drop [ALL], no-new-privileges", name)
		}
		if kind != "engine" && (!regexp.MustCompile(`^[1-9][0-9]*:[0-9]+$`).MatchString(svc.User)) {
			t.Errorf("%s: user %q, want a non-root numeric user:group", name, svc.User)
		}
		b, ok := base.Services[kind]
		if !ok {
			continue // etcd: TestComposeHAEtcd
		}
		// The replica is compose.yaml's service but for its addresses, name and volumes.
		same := func(field string, got, want any) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("%s: %s %s, but compose.yaml's %s has %s", name, field, g, kind, w)
			}
		}
		same("image", svc.Image, b.Image)
		same("build", svc.Build, b.Build)
		same("user", svc.User, b.User)
		same("healthcheck", svc.HealthCheck, b.HealthCheck)
		same("tmpfs", svc.Tmpfs, b.Tmpfs)
		same("restart", svc.Restart, b.Restart)
		if kind == "engine" {
			same("command", svc.Command, b.Command)
			same("volumes", svc.Volumes, b.Volumes)
			same("profiles", svc.Profiles, b.Profiles)
			continue
		}
		if kind == "inference" {
			same("volumes", svc.Volumes, b.Volumes) // the model file, read-only
		}
		if stages := dockerStages(t); svc.Build.Target != kind || stages[kind] == "" || svc.HealthCheck.Test[1] != stages[kind] {
			t.Errorf("%s: build target %q or health check %q is not the Dockerfile stage %q's entrypoint", name, svc.Build.Target, svc.HealthCheck.Test, kind)
		}
		// Every variable of compose.yaml's service, with its value, except the addresses
		// dialled; nothing more but what scale-out adds.
		dialled := map[string]string{}
		for k, z := range zest {
			if k != kind {
				dialled[z.listenVar] = k
			}
		}
		for k, v := range b.Environment {
			if _, ok := dialled[k]; !ok {
				same("environment "+k, deref(svc.Environment[k]), deref(v))
			}
		}
		for k := range svc.Environment {
			if _, inBase := b.Environment[k]; !inBase && !slices.Contains(haAdded[kind], k) {
				t.Errorf("%s: %s is not in compose.yaml's %s and not one scale-out adds", name, k, kind)
			}
		}
		// Each address dialled lists every replica of the service dialled, on its port.
		for k, target := range dialled {
			got, has := svc.Environment[k]
			if callers[kind][target] && !has {
				t.Errorf("%s calls %s but has no %s", name, target, k)
			}
			if want := list(kinds[target], zest[target].port); has && deref(got) != want {
				t.Errorf("%s: %s = %q, want every %s: %q", name, k, deref(got), target, want)
			}
		}
		// It starts once every replica of what it calls is healthy.
		deps := map[string][]string{"gateway": {"mcpgateway", "inference"}, "mcpgateway": {"etcd", "inference", "toolhost"}}[kind]
		var want []string
		for _, d := range deps {
			want = append(want, kinds[d]...)
		}
		slices.Sort(want)
		if got := slices.Sorted(maps.Keys(svc.DependsOn)); !slices.Equal(got, want) {
			t.Errorf("%s depends on %v, want %v", name, got, want)
		}
		for d, c := range svc.DependsOn {
			if c.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, d, c.Condition)
			}
		}
	}
}

// The registry: three members on one static initial cluster, each named as its service,
// data on a volume of its own, checked with etcdctl endpoint health, reached only by the
// mcpgateways (a network of their own), every one of which lists them all.
func TestComposeHAEtcd(t *testing.T) {
	ha := loadHA(t, haEnv)
	members := byKind(ha)["etcd"]
	var cluster []string
	for _, m := range members {
		cluster = append(cluster, m+"=http://"+m+":2380")
	}
	volumes := map[string]string{}
	for _, m := range members {
		svc := ha.Services[m]
		env := func(k string) string { return deref(svc.Environment[k]) }
		for k, want := range map[string]string{
			"ETCD_NAME":                        m,
			"ETCD_INITIAL_CLUSTER":             strings.Join(cluster, ","),
			"ETCD_INITIAL_CLUSTER_STATE":       "new",
			"ETCD_INITIAL_ADVERTISE_PEER_URLS": "http://" + m + ":2380",
			"ETCD_ADVERTISE_CLIENT_URLS":       "http://" + m + ":2379",
			"ETCD_LISTEN_PEER_URLS":            "http://0.0.0.0:2380",
			"ETCD_LISTEN_CLIENT_URLS":          "http://0.0.0.0:2379",
		} {
			if got := env(k); got != want {
				t.Errorf("%s: %s = %q, want %q", m, k, got, want)
			}
		}
		if env("ETCD_INITIAL_CLUSTER_TOKEN") != deref(ha.Services[members[0]].Environment["ETCD_INITIAL_CLUSTER_TOKEN"]) {
			t.Errorf("%s: another initial cluster token than %s's", m, members[0])
		}
		if !regexp.MustCompile(`^(quay\.io/coreos/etcd:v3\.\d+\.\d+|registry\.k8s\.io/etcd:3\.\d+\.\d+-\d+)$`).MatchString(svc.Image) {
			t.Errorf("%s: image %q, want a pinned etcd 3 release", m, svc.Image)
		}
		if hc := svc.HealthCheck; hc == nil || !strings.HasSuffix(hc.Test[1], "/etcdctl") || !slices.Contains(hc.Test, "endpoint") || !slices.Contains(hc.Test, "health") {
			t.Errorf("%s: health check %v, want etcdctl endpoint health", m, svc.HealthCheck)
		}
		// Its data on a named volume of its own.
		for _, v := range svc.Volumes {
			if v.Type == types.VolumeTypeVolume && strings.HasPrefix(env("ETCD_DATA_DIR")+"/", v.Target+"/") {
				if other, taken := volumes[v.Source]; taken {
					t.Errorf("%s shares volume %s with %s", m, v.Source, other)
				}
				if _, declared := ha.Volumes[v.Source]; !declared {
					t.Errorf("%s: volume %s is not declared", m, v.Source)
				}
				volumes[v.Source] = m
			}
		}
		if !slices.Contains(slices.Collect(maps.Values(volumes)), m) {
			t.Errorf("%s: ETCD_DATA_DIR %q is not on a named volume", m, env("ETCD_DATA_DIR"))
		}
	}
	// Only the members and the mcpgateways are on the registry's network, which is internal;
	// the members on no other.
	if n, ok := ha.Networks["registry"]; !ok || !n.Internal {
		t.Errorf("network registry %+v, want internal", n)
	}
	for name, svc := range ha.Services {
		_, on := svc.Networks["registry"]
		if kind := kindOf(name); on != (kind == "etcd" || kind == "mcpgateway") {
			t.Errorf("%s on the registry network: %v", name, on)
		}
		if kindOf(name) == "etcd" && len(svc.Networks) != 1 {
			t.Errorf("%s on networks %v, want only registry", name, slices.Collect(maps.Keys(svc.Networks)))
		}
	}
	for _, m := range byKind(ha)["mcpgateway"] {
		if got, want := deref(ha.Services[m].Environment["ZEST_REGISTRY"]), "etcd://"+list(members, 2379); got != want {
			t.Errorf("%s: ZEST_REGISTRY = %q, want every member: %q", m, got, want)
		}
	}
}

// Every mcpgateway signs sessions with the one ZEST_SESSION_KEY of the environment, which is
// required; each keeps its own data volume; each tool host has its own stable name.
func TestComposeHASessionKeyAndNames(t *testing.T) {
	ha := loadHA(t, haEnv)
	vols := map[string]bool{}
	for _, m := range byKind(ha)["mcpgateway"] {
		svc := ha.Services[m]
		if got := deref(svc.Environment["ZEST_SESSION_KEY"]); got != testSessionKey {
			t.Errorf("%s: ZEST_SESSION_KEY = %q, want the environment's", m, got)
		}
		for _, v := range svc.Volumes {
			if vols[v.Source] {
				t.Errorf("%s shares volume %s", m, v.Source)
			}
			vols[v.Source] = true
		}
	}
	names := map[string]bool{}
	for _, h := range byKind(ha)["toolhost"] {
		n := deref(ha.Services[h].Environment["ZEST_TOOLHOST_NAME"])
		if n != h || names[n] {
			t.Errorf("%s: ZEST_TOOLHOST_NAME = %q, want its service's name, unique", h, n)
		}
		names[n] = true
	}
	for _, c := range []struct {
		env       []string
		name, fix string
	}{
		{composeEnv, "ZEST_SESSION_KEY", "basenc --base64url"},
		{[]string{"ZEST_SESSION_KEY=" + testSessionKey}, "ZEST_SERVICE_KEY", "openssl rand"},
	} {
		_, err := loadComposeFile(t, "compose.ha.yaml", c.env)
		if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.fix) {
			t.Errorf("load without %s: %v, want a refusal naming it and how to make one", c.name, err)
		}
	}
}

// Only the edges are published, each on its own port of the host's loopback.
func TestComposeHAPublishesOnlyTheEdgesOnLoopback(t *testing.T) {
	for _, c := range []struct {
		env  []string
		a, b string
	}{
		{haEnv, "13305", "13306"},
		{append(slices.Clone(haEnv), "ZEST_EDGE_A_PORT=8088", "ZEST_EDGE_B_PORT=8089"), "8088", "8089"},
	} {
		ha := loadHA(t, c.env, "engine")
		for name, svc := range ha.Services {
			want := map[string]string{"gateway-a": c.a, "gateway-b": c.b}[name]
			if want == "" {
				if len(svc.Ports) > 0 {
					t.Errorf("%s publishes %v: only the edges may", name, svc.Ports)
				}
				continue
			}
			if len(svc.Ports) != 1 || svc.Ports[0].HostIP != "127.0.0.1" || svc.Ports[0].Target != 13305 || svc.Ports[0].Published != want {
				t.Errorf("%s ports %+v, want 127.0.0.1:%s → 13305", name, svc.Ports, want)
			}
		}
	}
}

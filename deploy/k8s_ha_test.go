package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The ha overlay: the registry on three etcd members, two of every Zest service spread over
// nodes, callers balancing over every replica, the session key shared from a Secret.
func TestKustomizeHAOverlay(t *testing.T) {
	m := build(t, "k8s/overlays/ha")
	checkPolicies(t, "ha", m)
	ws := m.workloads()
	want := append(keys(zestPods), "zest-etcd")
	slices.Sort(want)
	if got := keys(ws); !slices.Equal(got, want) {
		t.Fatalf("ha: workloads %v, want %v", got, want)
	}
	for name, w := range ws {
		replicas := int32(2)
		if name == "zest-etcd" {
			replicas = 3
		}
		if w.replicas != replicas {
			t.Errorf("ha: %s has %d replicas, want %d", name, w.replicas, replicas)
		}
		if !spreadOverNodes(w) {
			t.Errorf("ha: %s has no preferred pod anti-affinity on kubernetes.io/hostname against its own pods", name)
		}
	}
	if len(m.pvcs) != 0 {
		t.Errorf("ha: claims %v: the registry is etcd, mcpgateway keeps nothing on a claim", keys(m.pvcs))
	}

	// Callers reach every replica of what they call: dns:/// of a headless Service
	// (checkPolicies checks that the Service is headless and has the port).
	for caller, vars := range map[string][]string{
		"zest-gateway":    {"ZEST_MCPGATEWAY_ADDR", "ZEST_INFERENCE_ADDR", "ZEST_TOOLHOST_ADDR"},
		"zest-mcpgateway": {"ZEST_INFERENCE_ADDR", "ZEST_TOOLHOST_ADDR"},
	} {
		c := ws[caller].template.Spec.Containers[0]
		for _, v := range vars {
			if d := parseDial(env(c, v)); !d.dns || len(d.hosts) != 1 {
				t.Errorf("ha: %s dials %s = %q, want dns:///<headless service>:<port>", caller, v, env(c, v))
			}
		}
	}

	// mcpgateway: on etcd, every member listed; the session key from the Secret, required;
	// nothing on disk shared, so it rolls rather than Recreate.
	mg := ws["zest-mcpgateway"]
	mc := mg.template.Spec.Containers[0]
	if got, want := env(mc, "ZEST_REGISTRY"), "etcd://"+strings.Join(etcdMembers(t, m, "client"), ","); got != want {
		t.Errorf("ha: mcpgateway ZEST_REGISTRY = %q, want every etcd member's client URL: %q", got, want)
	}
	if k := envFrom(mc, "ZEST_SESSION_KEY"); k == nil || k.SecretKeyRef == nil || k.SecretKeyRef.Name != "zest-keys" ||
		k.SecretKeyRef.Key != "ZEST_SESSION_KEY" || (k.SecretKeyRef.Optional != nil && *k.SecretKeyRef.Optional) {
		t.Errorf("ha: mcpgateway ZEST_SESSION_KEY %+v, want required key ZEST_SESSION_KEY of Secret zest-keys (one key for every replica)", k)
	}
	if s := m.deployments["zest-mcpgateway"].Spec.Strategy; s.Type != "RollingUpdate" || s.RollingUpdate == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("ha: mcpgateway strategy %+v, want RollingUpdate with maxUnavailable 0", s)
	}

	// The tool host: a StatefulSet named by its pods, its pod otherwise the base's.
	th := m.statefulSets["zest-toolhost"]
	if th == nil {
		t.Fatal("ha: the tool host is not a StatefulSet")
	}
	tc := th.Spec.Template.Spec.Containers[0]
	if n := envFrom(tc, "ZEST_TOOLHOST_NAME"); n == nil || n.FieldRef == nil || n.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("ha: tool host ZEST_TOOLHOST_NAME %+v, want the pod's name (fieldRef metadata.name): stable across restarts", n)
	}
	if s := m.services[th.Spec.ServiceName]; s == nil || s.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("ha: tool host serviceName %q is not a headless Service of the build", th.Spec.ServiceName)
	}
	if th.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("ha: tool host podManagementPolicy %q, want Parallel (hosts need no start order)", th.Spec.PodManagementPolicy)
	}
	base := build(t, "k8s/base").deployments["zest-toolhost"].Spec.Template
	got := *th.Spec.Template.DeepCopy()
	got.Spec.Affinity = nil
	got.Spec.Containers[0].Env = slices.DeleteFunc(got.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "ZEST_TOOLHOST_NAME" })
	if d := yamlDiff(t, got, base); d != "" {
		t.Errorf("ha: the tool host's pod drifted from the base's Deployment (beyond ZEST_TOOLHOST_NAME and the anti-affinity):\n%s", d)
	}

	checkEtcd(t, m)
}

// checkEtcd checks the registry: three members that agree on one initial cluster, each
// named by its pod and found through a headless Service that publishes them before they are
// ready, data on a claim of each, at least two kept through a drain, and a network policy
// that lets only mcpgateway (and the members) reach it.
func checkEtcd(t *testing.T, m manifests) {
	t.Helper()
	sts := m.statefulSets["zest-etcd"]
	if sts == nil {
		t.Fatal("ha: no StatefulSet zest-etcd")
	}
	svc := m.services[sts.Spec.ServiceName]
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("ha: etcd serviceName %q: want a headless Service publishing not-ready addresses (members find their peers before quorum)", sts.Spec.ServiceName)
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("ha: etcd podManagementPolicy %q, want Parallel: a member waits for its peers, so they must start together", sts.Spec.PodManagementPolicy)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if !strings.HasPrefix(c.Image, "quay.io/coreos/etcd:v3.") && !strings.HasPrefix(c.Image, "registry.k8s.io/etcd:3.") {
		t.Errorf("ha: etcd image %q, want a pinned etcd 3 release", c.Image)
	}
	if n := envFrom(c, "ETCD_NAME"); n == nil || n.FieldRef == nil || n.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("ha: ETCD_NAME %+v, want the pod's name", n)
	}
	// Every member advertises, for its own name, the URL the initial cluster gives it.
	peers := etcdMembers(t, m, "peer")
	var cluster []string
	for i, p := range peers {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		cluster = append(cluster, name+"=http://"+p)
		expand := func(v string) string { return strings.ReplaceAll(env(c, v), "$(ETCD_NAME)", name) }
		if got := expand("ETCD_INITIAL_ADVERTISE_PEER_URLS"); got != "http://"+p {
			t.Errorf("ha: %s advertises peer URL %q, want http://%s", name, got, p)
		}
		if got, want := expand("ETCD_ADVERTISE_CLIENT_URLS"), "http://"+etcdMembers(t, m, "client")[i]; got != want {
			t.Errorf("ha: %s advertises client URL %q, want %s", name, got, want)
		}
	}
	if got := env(c, "ETCD_INITIAL_CLUSTER"); got != strings.Join(cluster, ",") || env(c, "ETCD_INITIAL_CLUSTER_STATE") != "new" {
		t.Errorf("ha: ETCD_INITIAL_CLUSTER %q (state %q), want the %d members: %q", got, env(c, "ETCD_INITIAL_CLUSTER_STATE"), len(cluster), strings.Join(cluster, ","))
	}
	// The data lives on the member's claim.
	dataDir, onClaim := env(c, "ETCD_DATA_DIR"), false
	for _, vm := range c.VolumeMounts {
		for _, ct := range sts.Spec.VolumeClaimTemplates {
			if vm.Name == ct.Name && strings.HasPrefix(dataDir+"/", vm.MountPath+"/") {
				onClaim = true
			}
		}
	}
	if !onClaim {
		t.Errorf("ha: ETCD_DATA_DIR %q is not on a volumeClaimTemplate's mount", dataDir)
	}
	if psc := sts.Spec.Template.Spec.SecurityContext; psc.FSGroup == nil || *psc.FSGroup != *psc.RunAsUser {
		t.Errorf("ha: etcd without fsGroup = its user: the claim would not be writable to the non-root member")
	}
	// Liveness must not need quorum (losing it would restart every member); readiness does.
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/livez" {
		t.Errorf("ha: etcd liveness %+v, want GET /livez", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("ha: etcd readiness %+v, want GET /readyz", p)
	}
	if pdb := m.pdbs["zest-etcd"]; pdb == nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("ha: etcd budget %v, want minAvailable 2 (a quorum of 3)", pdb)
	}
	// Who reaches etcd: its client port only mcpgateway and the members, its peer port only
	// the members. The tool hosts run third-party servers; the edge and inference have no
	// business there.
	ws := m.workloads()
	for _, port := range c.Ports {
		if port.Name == "metrics" {
			continue
		}
		for name, w := range ws {
			allowed := name == "zest-etcd" || (name == "zest-mcpgateway" && port.Name == "client")
			if got := admitted(m.networkPolicies, sts.Spec.Template.Labels, port, w.template.Labels); got != allowed {
				t.Errorf("ha: %s reaches etcd's %s port: %v, want %v", name, port.Name, got, allowed)
			}
		}
	}
}

// etcdMembers returns host:port of each etcd member on the named port, as its pod's DNS name
// under the headless Service: zest-etcd-0.zest-etcd:2379, …
func etcdMembers(t *testing.T, m manifests, port string) []string {
	t.Helper()
	sts := m.statefulSets["zest-etcd"]
	if sts == nil {
		t.Fatal("ha: no StatefulSet zest-etcd")
	}
	svc := m.services[sts.Spec.ServiceName]
	if svc == nil {
		t.Fatalf("ha: etcd's serviceName %q is no Service", sts.Spec.ServiceName)
	}
	var p int32
	for _, sp := range svc.Spec.Ports {
		if sp.Name == port {
			p = sp.Port
		}
	}
	if p == 0 {
		t.Fatalf("ha: Service %s has no port %s", svc.Name, port)
	}
	var out []string
	for i := range *sts.Spec.Replicas {
		out = append(out, fmt.Sprintf("%s-%d.%s:%d", sts.Name, i, svc.Name, p))
	}
	return out
}

// spreadOverNodes says whether a workload prefers its pods on different nodes.
func spreadOverNodes(w workload) bool {
	a := w.template.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for _, term := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		s, err := metav1.LabelSelectorAsSelector(term.PodAffinityTerm.LabelSelector)
		if err == nil && term.Weight > 0 && term.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname" && s.Matches(labels.Set(w.template.Labels)) {
			return true
		}
	}
	return false
}

// admitted says whether the network policies selecting the target pods let a pod with
// labels from reach the target's port (pods no policy selects take everything).
func admitted(policies map[string]*networkingv1.NetworkPolicy, target labels.Set, port corev1.ContainerPort, from labels.Set) bool {
	selected := false
	for _, np := range policies {
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !s.Matches(target) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				if p.Port == nil || p.Port.String() == port.Name || p.Port.IntValue() == int(port.ContainerPort) {
					portOK = true
				}
			}
			fromOK := len(rule.From) == 0
			for _, peer := range rule.From {
				if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil {
					fromOK = true // wider than pods of this namespace: counts as anyone
					continue
				}
				if s, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err == nil && s.Matches(from) {
					fromOK = true
				}
			}
			if portOK && fromOK {
				return true
			}
		}
	}
	return !selected
}

// yamlDiff returns the lines of got's YAML and want's that the other lacks ("" when equal).
func yamlDiff(t *testing.T, got, want any) string {
	t.Helper()
	g, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := strings.Split(string(g), "\n"), strings.Split(string(w), "\n")
	var out []string
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			out = append(out, "- "+l)
		}
	}
	if len(out) == 0 && string(g) != string(w) {
		out = append(out, "(the same lines, in another order)")
	}
	return strings.Join(out, "\n")
}

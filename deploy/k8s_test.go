package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// manifests is one kustomization built and decoded into the Kubernetes types.
type manifests struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
	configMaps  map[string]*corev1.ConfigMap
	pvcs        map[string]*corev1.PersistentVolumeClaim
}

// build runs kustomize (its Go API, as `kubectl kustomize` does) over dir and decodes every
// object strictly into its Kubernetes type: an unknown or misspelt field, or a value of the
// wrong type, fails the test. Kinds outside the list fail too.
func build(t *testing.T, dir string) manifests {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	m := manifests{map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*policyv1.PodDisruptionBudget{},
		map[string]*corev1.ConfigMap{}, map[string]*corev1.PersistentVolumeClaim{}}
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		gvk := r.GetGvk()
		name := r.GetName()
		var obj interface{ GetName() string }
		switch gvk.ApiVersion() + "/" + gvk.Kind {
		case "apps/v1/Deployment":
			d := &appsv1.Deployment{}
			m.deployments[name], obj = d, d
		case "v1/Service":
			s := &corev1.Service{}
			m.services[name], obj = s, s
		case "policy/v1/PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			m.pdbs[name], obj = p, p
		case "v1/ConfigMap":
			c := &corev1.ConfigMap{}
			m.configMaps[name], obj = c, c
		case "v1/PersistentVolumeClaim":
			c := &corev1.PersistentVolumeClaim{}
			m.pvcs[name], obj = c, c
		default:
			t.Fatalf("%s: %s %s is a kind this test does not check", dir, gvk, name)
		}
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			t.Fatalf("%s: %s %s does not match the Kubernetes schema: %v", dir, gvk.Kind, name, err)
		}
		for _, e := range validation.IsDNS1123Subdomain(name) {
			t.Errorf("%s: %s name %q: %s", dir, gvk.Kind, name, e)
		}
	}
	return m
}

// zestPods names each Deployment with its container port, probe kind and metrics port.
var zestPods = map[string]struct {
	port    int32
	grpc    bool
	metrics int32
}{
	"zest-gateway":    {13305, false, 13319},
	"zest-mcpgateway": {13311, true, 13321},
	"zest-inference":  {13310, true, 13320},
	"zest-toolhost":   {13312, true, 13322},
}

// checkPolicies checks what every deployment of Zest must hold, base or overlay.
func checkPolicies(t *testing.T, dir string, m manifests) {
	t.Helper()
	if len(m.deployments) != len(zestPods) {
		t.Errorf("%s: deployments %v, want the four", dir, keys(m.deployments))
	}
	for name, want := range zestPods {
		d := m.deployments[name]
		if d == nil {
			t.Errorf("%s: no Deployment %s", dir, name)
			continue
		}
		where := dir + ": " + name
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v does not select its own pods %v", where, d.Spec.Selector, d.Spec.Template.Labels)
		}
		pod := d.Spec.Template.Spec
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("%s: pod must run as a non-root numeric user (runAsNonRoot, runAsUser ≠ 0)", where)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: want seccompProfile RuntimeDefault", where)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service account token it never uses", where)
		}
		if len(pod.Containers) != 1 {
			t.Errorf("%s: %d containers, want 1", where, len(pod.Containers))
			continue
		}
		c := pod.Containers[0]
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: want readOnlyRootFilesystem", where)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: want allowPrivilegeEscalation false", where)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: want capabilities drop [ALL], none added", where)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
				t.Errorf("%s: no %s request", where, r)
			}
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.Cmp(c.Resources.Requests[corev1.ResourceMemory]) < 0 {
			t.Errorf("%s: memory limit %v below its request (or none)", where, q.String())
		}
		if !hasMount(c, "/tmp") {
			t.Errorf("%s: no writable /tmp (the root file system is read-only)", where)
		}
		// The service's port first, then its metrics port (scraped in the pod, not a Service's).
		if len(c.Ports) != 2 || c.Ports[0].ContainerPort != want.port || c.Ports[1].Name != "metrics" || c.Ports[1].ContainerPort != want.metrics {
			t.Errorf("%s: ports %v, want %d and metrics %d", where, c.Ports, want.port, want.metrics)
		}
		listen := map[bool]string{true: "", false: "ZEST_EDGE_ADDR"}[want.grpc]
		if listen == "" {
			listen = "ZEST_" + strings.ToUpper(strings.TrimPrefix(name, "zest-")) + "_ADDR"
		}
		if v := env(c, listen); v != fmt.Sprintf("0.0.0.0:%d", want.port) {
			t.Errorf("%s: %s = %q, want 0.0.0.0:%d", where, listen, v, want.port)
		}
		// Probes: startup, readiness and liveness on the service's own health — the native
		// gRPC probe (grpc.health.v1, service "") or the edge's GET /live — each with a
		// timeout.
		for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil {
				t.Errorf("%s: no %s probe", where, kind)
				continue
			}
			switch {
			case want.grpc && (p.GRPC == nil || p.GRPC.Port != want.port || (p.GRPC.Service != nil && *p.GRPC.Service != "")):
				t.Errorf("%s: %s probe %+v, want gRPC health on %d", where, kind, p.ProbeHandler, want.port)
			case !want.grpc && (p.HTTPGet == nil || p.HTTPGet.Path != "/live" || p.HTTPGet.Port.String() != c.Ports[0].Name):
				t.Errorf("%s: %s probe %+v, want GET /live on the http port", where, kind, p.ProbeHandler)
			}
			if kind != "startup" && (p.TimeoutSeconds < 1 || p.TimeoutSeconds > 5) {
				t.Errorf("%s: %s probe timeout %ds, want 1 to 5", where, kind, p.TimeoutSeconds)
			}
		}
		// A budget covers the pods, and never blocks every drain.
		covered := 0
		for pn, pdb := range m.pdbs {
			s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
				continue
			}
			covered++
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			if mu := pdb.Spec.MaxUnavailable; mu != nil && mu.IntValue() < 1 {
				t.Errorf("%s: PodDisruptionBudget %s maxUnavailable %v blocks every drain", where, pn, mu)
			}
			if ma := pdb.Spec.MinAvailable; ma != nil && int32(ma.IntValue()) >= replicas {
				t.Errorf("%s: PodDisruptionBudget %s minAvailable %v with %d replicas blocks every drain", where, pn, ma, replicas)
			}
			if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
				t.Errorf("%s: PodDisruptionBudget %s wants exactly one of minAvailable, maxUnavailable", where, pn)
			}
		}
		if covered != 1 {
			t.Errorf("%s: covered by %d PodDisruptionBudgets, want 1", where, covered)
		}
		// One Service selects exactly these pods on the container's port.
		svc := m.services[name]
		if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != want.port || svc.Spec.Ports[0].TargetPort.String() != c.Ports[0].Name {
			t.Errorf("%s: Service %v, want one port %d to the container's", where, svc, want.port)
		} else if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: Service selects %v, not the pods", where, svc.Spec.Selector)
		}
		if svc != nil && svc.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("%s: Service type %s: nothing is exposed outside the cluster by these manifests", where, svc.Spec.Type)
		}
		// Every address a pod dials names a Service and its port.
		for _, e := range c.Env {
			if !strings.HasSuffix(e.Name, "_ADDR") || e.Name == listen {
				continue
			}
			if strings.HasSuffix(e.Name, "_METRICS_ADDR") { // its own listener, the pod's metrics port
				if e.Value != fmt.Sprintf("0.0.0.0:%d", want.metrics) || d.Spec.Template.Annotations["prometheus.io/port"] != fmt.Sprint(want.metrics) {
					t.Errorf("%s: %s = %q, want 0.0.0.0:%d with the prometheus.io annotations", where, e.Name, e.Value, want.metrics)
				}
				continue
			}
			host, port, _ := strings.Cut(e.Value, ":")
			target := m.services[host]
			if target == nil || fmt.Sprint(target.Spec.Ports[0].Port) != port {
				t.Errorf("%s: %s = %q names no Service port", where, e.Name, e.Value)
			}
		}
		// Volumes a container mounts exist, with bounded emptyDirs.
		for _, v := range pod.Volumes {
			if v.EmptyDir != nil && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("0")) <= 0) {
				t.Errorf("%s: emptyDir %s has no sizeLimit", where, v.Name)
			}
			if v.ConfigMap != nil && m.configMaps[v.ConfigMap.Name] == nil {
				t.Errorf("%s: volume %s names ConfigMap %s, which the build does not hold", where, v.Name, v.ConfigMap.Name)
			}
			if v.PersistentVolumeClaim != nil && m.pvcs[v.PersistentVolumeClaim.ClaimName] == nil {
				t.Errorf("%s: volume %s names claim %s, which the build does not hold", where, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
		for _, vm := range c.VolumeMounts {
			if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) {
				t.Errorf("%s: mounts volume %s, which the pod does not have", where, vm.Name)
			}
		}
		// The service key: required where it is used, absent elsewhere.
		key := envFrom(c, "ZEST_SERVICE_KEY")
		switch name {
		case "zest-toolhost", "zest-mcpgateway":
			if key == nil || key.SecretKeyRef == nil || (key.SecretKeyRef.Optional != nil && *key.SecretKeyRef.Optional) {
				t.Errorf("%s: ZEST_SERVICE_KEY must come from a required Secret key", where)
			}
		default:
			if key != nil || env(c, "ZEST_SERVICE_KEY") != "" {
				t.Errorf("%s holds ZEST_SERVICE_KEY; only mcpgateway and the tool host may", where)
			}
		}
	}
	// The model file reaches inference: ZEST_MODELS_FILE lies in the ConfigMap's mount.
	inf := m.deployments["zest-inference"].Spec.Template.Spec
	path := env(inf.Containers[0], "ZEST_MODELS_FILE")
	found := false
	for _, vm := range inf.Containers[0].VolumeMounts {
		for _, v := range inf.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil || !vm.ReadOnly {
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if vm.MountPath+"/"+it.Path == path && m.configMaps[v.ConfigMap.Name].Data[it.Key] != "" {
					found = true
				}
			}
		}
	}
	if !found {
		t.Errorf("%s: ZEST_MODELS_FILE=%q is not a key of a ConfigMap mounted read-only into inference", dir, path)
	}
}

func TestKustomizeBase(t *testing.T) {
	m := build(t, "k8s/base")
	checkPolicies(t, "base", m)
	if len(m.pdbs) != 4 || len(m.services) != 4 || len(m.configMaps) != 1 || len(m.pvcs) != 1 {
		t.Errorf("base: %d PDBs, %d Services, %d ConfigMaps, %d claims; want 4, 4, 1, 1", len(m.pdbs), len(m.services), len(m.configMaps), len(m.pvcs))
	}
	for name, d := range m.deployments {
		if *d.Spec.Replicas != 1 || d.Spec.Template.Spec.NodeSelector != nil {
			t.Errorf("base: %s has %d replicas, nodeSelector %v; the base runs one of each anywhere", name, *d.Spec.Replicas, d.Spec.Template.Spec.NodeSelector)
		}
	}
	// The registry is a bbolt file one process opens: one replica, no overlap on rollout.
	if d := m.deployments["zest-mcpgateway"]; d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("mcpgateway strategy %q, want Recreate", d.Spec.Strategy.Type)
	}
}

// The split overlay runs the tool host and inference on pools of their own, never on one
// node, each with its own scale.
func TestKustomizeSplitOverlay(t *testing.T) {
	m := build(t, "k8s/overlays/split")
	checkPolicies(t, "split", m)
	inf, th := m.deployments["zest-inference"], m.deployments["zest-toolhost"]
	if *inf.Spec.Replicas < 2 {
		t.Errorf("split: inference replicas %d, want several", *inf.Spec.Replicas)
	}
	ip, tp := inf.Spec.Template.Spec.NodeSelector["zest.dev/pool"], th.Spec.Template.Spec.NodeSelector["zest.dev/pool"]
	if ip == "" || tp == "" || ip == tp {
		t.Errorf("split: node pools inference %q, toolhost %q: want two different ones", ip, tp)
	}
	for _, pair := range [][2]*appsv1.Deployment{{inf, th}, {th, inf}} {
		a, b := pair[0], pair[1]
		spec := a.Spec.Template.Spec
		tolerated := slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == "zest.dev/pool" && tl.Value == spec.NodeSelector["zest.dev/pool"]
		})
		if !tolerated {
			t.Errorf("split: %s does not tolerate its pool's taint", a.Name)
		}
		apart := false
		if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
			for _, term := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				s, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
				if err == nil && term.TopologyKey == "kubernetes.io/hostname" && s.Matches(labels.Set(b.Spec.Template.Labels)) {
					apart = true
				}
			}
		}
		if !apart {
			t.Errorf("split: %s may share a node with %s (no required anti-affinity)", a.Name, b.Name)
		}
	}
	if pdb := m.pdbs["zest-inference"]; pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("split: inference budget %+v, want minAvailable 2 of 3", pdb.Spec)
	}
	// The pools' requests are the overlay's, above the base's.
	if q := inf.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) < 0 {
		t.Errorf("split: inference cpu request %s, want the overlay's 1", q.String())
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func hasMount(c corev1.Container, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == path && !v.ReadOnly })
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envFrom(c corev1.Container, name string) *corev1.EnvVarSource {
	for _, e := range c.Env {
		if e.Name == name {
			return e.ValueFrom
		}
	}
	return nil
}

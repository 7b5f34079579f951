package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
	deployments     map[string]*appsv1.Deployment
	statefulSets    map[string]*appsv1.StatefulSet
	services        map[string]*corev1.Service
	pdbs            map[string]*policyv1.PodDisruptionBudget
	configMaps      map[string]*corev1.ConfigMap
	pvcs            map[string]*corev1.PersistentVolumeClaim
	networkPolicies map[string]*networkingv1.NetworkPolicy
}

// workload is what the checks need of a Deployment or a StatefulSet.
type workload struct {
	replicas int32
	selector *metav1.LabelSelector
	template corev1.PodTemplateSpec
	claims   []string // the StatefulSet's volumeClaimTemplates, volumes its pods may mount
}

// workloads returns every Deployment and StatefulSet by name (no build has two of one name).
func (m manifests) workloads() map[string]workload {
	out := map[string]workload{}
	one := func(r *int32) int32 {
		if r == nil {
			return 1
		}
		return *r
	}
	for n, d := range m.deployments {
		out[n] = workload{one(d.Spec.Replicas), d.Spec.Selector, d.Spec.Template, nil}
	}
	for n, s := range m.statefulSets {
		var claims []string
		for _, c := range s.Spec.VolumeClaimTemplates {
			claims = append(claims, c.Name)
		}
		out[n] = workload{one(s.Spec.Replicas), s.Spec.Selector, s.Spec.Template, claims}
	}
	return out
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
	m := manifests{map[string]*appsv1.Deployment{}, map[string]*appsv1.StatefulSet{}, map[string]*corev1.Service{},
		map[string]*policyv1.PodDisruptionBudget{}, map[string]*corev1.ConfigMap{}, map[string]*corev1.PersistentVolumeClaim{},
		map[string]*networkingv1.NetworkPolicy{}}
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
		case "apps/v1/StatefulSet":
			s := &appsv1.StatefulSet{}
			m.statefulSets[name], obj = s, s
		case "networking.k8s.io/v1/NetworkPolicy":
			p := &networkingv1.NetworkPolicy{}
			m.networkPolicies[name], obj = p, p
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

// checkPod checks what every workload of a build must hold, Zest's or not (etcd): non-root,
// read-only, capability-free pods with requests and limits, a probe of each kind with a
// timeout, one budget that never blocks a drain, mounted volumes that exist, and secrets
// only from Secrets.
func checkPod(t *testing.T, where string, w workload, m manifests) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil || !sel.Matches(labels.Set(w.template.Labels)) {
		t.Errorf("%s: selector %v does not select its own pods %v", where, w.selector, w.template.Labels)
	}
	pod := w.template.Spec
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
		return
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
	for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil {
			t.Errorf("%s: no %s probe", where, kind)
			continue
		}
		if p.GRPC == nil && p.HTTPGet == nil && p.Exec == nil && p.TCPSocket == nil {
			t.Errorf("%s: %s probe checks nothing", where, kind)
		}
		if kind != "startup" && (p.TimeoutSeconds < 1 || p.TimeoutSeconds > 5) {
			t.Errorf("%s: %s probe timeout %ds, want 1 to 5", where, kind, p.TimeoutSeconds)
		}
	}
	// A budget covers the pods, and never blocks every drain.
	covered := 0
	for pn, pdb := range m.pdbs {
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !s.Matches(labels.Set(w.template.Labels)) {
			continue
		}
		covered++
		if mu := pdb.Spec.MaxUnavailable; mu != nil && mu.IntValue() < 1 {
			t.Errorf("%s: PodDisruptionBudget %s maxUnavailable %v blocks every drain", where, pn, mu)
		}
		if ma := pdb.Spec.MinAvailable; ma != nil && int32(ma.IntValue()) >= w.replicas {
			t.Errorf("%s: PodDisruptionBudget %s minAvailable %v with %d replicas blocks every drain", where, pn, ma, w.replicas)
		}
		if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
			t.Errorf("%s: PodDisruptionBudget %s wants exactly one of minAvailable, maxUnavailable", where, pn)
		}
	}
	if covered != 1 {
		t.Errorf("%s: covered by %d PodDisruptionBudgets, want 1", where, covered)
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
		if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) && !slices.Contains(w.claims, vm.Name) {
			t.Errorf("%s: mounts volume %s, which the pod does not have", where, vm.Name)
		}
	}
	// No secret is written into a manifest: a variable named like one comes from a Secret.
	for _, e := range c.Env {
		if secretName(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s: %s is a secret: take it from a Secret (secretKeyRef), not a value", where, e.Name)
		}
	}
}

// secretName says whether an environment variable holds a credential, by its name.
func secretName(name string) bool {
	// etcd's initial cluster token only keeps two clusters' members apart; it grants nothing.
	if name == "ETCD_INITIAL_CLUSTER_TOKEN" {
		return false
	}
	return regexp.MustCompile(`(_KEY|_PASSWORD|_SECRET|_TOKEN)$`).MatchString(name)
}

// dialTarget is one address a pod dials: host:port, a comma-separated list of them, or
// dns:///host:port (a name that resolves to every replica, for the caller's own balancing).
type dialTarget struct {
	hosts, ports []string
	dns          bool
}

func parseDial(v string) dialTarget {
	var d dialTarget
	rest, dns := strings.CutPrefix(v, "dns:///")
	d.dns = dns
	for _, a := range strings.Split(rest, ",") {
		h, p, _ := strings.Cut(a, ":")
		d.hosts, d.ports = append(d.hosts, h), append(d.ports, p)
	}
	return d
}

// checkPolicies checks what every deployment of Zest must hold, base or overlay.
func checkPolicies(t *testing.T, dir string, m manifests) {
	t.Helper()
	ws := m.workloads()
	for name, w := range ws {
		checkPod(t, dir+": "+name, w, m)
	}
	for name, want := range zestPods {
		w, ok := ws[name]
		if !ok {
			t.Errorf("%s: no Deployment or StatefulSet %s", dir, name)
			continue
		}
		where := dir + ": " + name
		pod := w.template.Spec
		if len(pod.Containers) != 1 {
			continue // checkPod said so
		}
		c := pod.Containers[0]
		// The service's port first, then its metrics port (scraped in the pod, not a Service's).
		if len(c.Ports) != 2 || c.Ports[0].ContainerPort != want.port || c.Ports[1].Name != "metrics" || c.Ports[1].ContainerPort != want.metrics {
			t.Errorf("%s: ports %v, want %d and metrics %d", where, c.Ports, want.port, want.metrics)
			continue
		}
		listen := map[bool]string{true: "", false: "ZEST_EDGE_ADDR"}[want.grpc]
		if listen == "" {
			listen = "ZEST_" + strings.ToUpper(strings.TrimPrefix(name, "zest-")) + "_ADDR"
		}
		if v := env(c, listen); v != fmt.Sprintf("0.0.0.0:%d", want.port) {
			t.Errorf("%s: %s = %q, want 0.0.0.0:%d", where, listen, v, want.port)
		}
		// Probes on the service's own health: the native gRPC probe (grpc.health.v1, service
		// "") or the edge's GET /live.
		for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			switch {
			case p == nil:
			case want.grpc && (p.GRPC == nil || p.GRPC.Port != want.port || (p.GRPC.Service != nil && *p.GRPC.Service != "")):
				t.Errorf("%s: %s probe %+v, want gRPC health on %d", where, kind, p.ProbeHandler, want.port)
			case !want.grpc && (p.HTTPGet == nil || p.HTTPGet.Path != "/live" || p.HTTPGet.Port.String() != c.Ports[0].Name):
				t.Errorf("%s: %s probe %+v, want GET /live on the http port", where, kind, p.ProbeHandler)
			}
		}
		// One Service selects exactly these pods on the container's port.
		svc := m.services[name]
		if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != want.port || svc.Spec.Ports[0].TargetPort.String() != c.Ports[0].Name {
			t.Errorf("%s: Service %v, want one port %d to the container's", where, svc, want.port)
		} else if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
			t.Errorf("%s: Service selects %v, not the pods", where, svc.Spec.Selector)
		}
		if svc != nil && svc.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("%s: Service type %s: nothing is exposed outside the cluster by these manifests", where, svc.Spec.Type)
		}
		// Every address a pod dials names a Service and its port; dns:/// (every replica)
		// only a headless one, whose DNS name answers the pods rather than one virtual IP.
		for _, e := range c.Env {
			if !strings.HasSuffix(e.Name, "_ADDR") || e.Name == listen {
				continue
			}
			if strings.HasSuffix(e.Name, "_METRICS_ADDR") { // its own listener, the pod's metrics port
				if e.Value != fmt.Sprintf("0.0.0.0:%d", want.metrics) || w.template.Annotations["prometheus.io/port"] != fmt.Sprint(want.metrics) {
					t.Errorf("%s: %s = %q, want 0.0.0.0:%d with the prometheus.io annotations", where, e.Name, e.Value, want.metrics)
				}
				if env(c, "ZEST_METRICS_PUBLIC") != "true" { // the service refuses to start without it
					t.Errorf("%s: %s is not loopback but ZEST_METRICS_PUBLIC is not true", where, e.Name)
				}
				continue
			}
			d := parseDial(e.Value)
			for i, host := range d.hosts {
				target := m.services[host]
				if target == nil || fmt.Sprint(target.Spec.Ports[0].Port) != d.ports[i] {
					t.Errorf("%s: %s = %q names no Service port", where, e.Name, e.Value)
				} else if d.dns && target.Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("%s: %s = %q resolves Service %s, which is not headless (its DNS name is one virtual IP)", where, e.Name, e.Value, host)
				}
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
	inf := ws["zest-inference"].template.Spec
	if len(inf.Containers) == 0 {
		return
	}
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
	if got := keys(m.workloads()); !slices.Equal(got, keys(zestPods)) || len(m.statefulSets) > 0 {
		t.Errorf("base: workloads %v (%d StatefulSets), want the four Deployments %v", got, len(m.statefulSets), keys(zestPods))
	}
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
	if got := keys(m.workloads()); !slices.Equal(got, keys(zestPods)) || len(m.statefulSets) > 0 {
		t.Errorf("split: workloads %v (%d StatefulSets), want the four Deployments %v", got, len(m.statefulSets), keys(zestPods))
	}
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

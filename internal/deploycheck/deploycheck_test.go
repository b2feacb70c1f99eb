package deploycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"
)

// root is the repository, from this package's directory.
const root = "../.."

var manifestsDir = filepath.Join(root, "deploy", "kubernetes")

// The kinds the manifests are made of, with the apiVersion of each.
var expectedKinds = map[string]string{
	"ConfigMap":           "v1",
	"Deployment":          "apps/v1",
	"PodDisruptionBudget": "policy/v1",
	"Secret":              "v1",
	"Service":             "v1",
	"ServiceAccount":      "v1",
	"StatefulSet":         "apps/v1",
}

func load(t *testing.T) *Manifests {
	t.Helper()
	m, err := Load(manifestsDir)
	if err != nil {
		t.Fatalf("loading the manifests: %v", err)
	}
	if len(m.Objects) == 0 {
		t.Fatalf("no manifests under %s", manifestsDir)
	}
	return m
}

func TestObjectsHaveIdentity(t *testing.T) {
	m := load(t)
	seen := map[string]string{}
	for _, o := range m.Objects {
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("%s: want apiVersion, kind and metadata.name, have %q, %q, %q", o, o.APIVersion, o.Kind, o.Metadata.Name)
		}
		if want, ok := expectedKinds[o.Kind]; ok && o.APIVersion != want {
			t.Errorf("%s: apiVersion %s, want %s", o, o.APIVersion, want)
		}
		if o.Metadata.Namespace != "" {
			t.Errorf("%s: namespace %q: the manifests are namespace-agnostic (kubectl apply -k ... -n NS)", o, o.Metadata.Namespace)
		}
		id := o.Kind + "/" + o.Metadata.Name
		if prev, dup := seen[id]; dup {
			t.Errorf("%s: %s is also defined in %s", o, id, prev)
		}
		seen[id] = o.String()
	}
}

func TestKinds(t *testing.T) {
	m := load(t)
	have := map[string]bool{}
	for _, o := range m.Objects {
		have[o.Kind] = true
		if o.Value == nil {
			t.Errorf("%s: unexpected kind %s (expected: %v); if it is meant, add it to deploycheck and to expectedKinds", o, o.Kind, sortedKeys(expectedKinds))
		}
	}
	for k := range expectedKinds {
		if !have[k] {
			t.Errorf("no %s in the manifests", k)
		}
	}
}

func TestSelectorsMatchTemplates(t *testing.T) {
	m := load(t)
	ws := m.Workloads()
	for _, w := range ws {
		if len(w.Selector.MatchExpressions) > 0 {
			t.Errorf("%s: selector.matchExpressions: use matchLabels (the test does not evaluate expressions)", w)
		}
		if len(w.Selector.MatchLabels) == 0 {
			t.Errorf("%s: no selector.matchLabels", w)
			continue
		}
		if !w.Selector.Matches(w.Template.Metadata.Labels) {
			t.Errorf("%s: selector %v does not match the template's labels %v", w, w.Selector.MatchLabels, w.Template.Metadata.Labels)
		}
		for _, o := range ws {
			if o.String() != w.String() && w.Selector.Matches(o.Template.Metadata.Labels) {
				t.Errorf("%s: selector %v also selects the pods of %s", w, w.Selector.MatchLabels, o)
			}
		}
	}
}

// selected returns the workloads whose pods a Service selects.
func selected(m *Manifests, sel map[string]string) []Workload {
	var out []Workload
	for _, w := range m.Workloads() {
		if SelectorMatches(sel, w.Template.Metadata.Labels) {
			out = append(out, w)
		}
	}
	return out
}

// findPort finds a container port by name (a string target) or number.
func findPort(w Workload, target IntOrString) (ContainerPort, bool) {
	for _, c := range w.Template.Spec.Containers {
		for _, p := range c.Ports {
			if (target.IsInt && p.ContainerPort == target.Int) || (!target.IsInt && p.Name == target.Str) {
				return p, true
			}
		}
	}
	return ContainerPort{}, false
}

func TestServicesSelectPodsAndPorts(t *testing.T) {
	m := load(t)
	for _, s := range m.Services {
		ws := selected(m, s.Spec.Selector)
		if len(ws) == 0 {
			t.Errorf("Service %s: selector %v selects no workload's pods", s.Metadata.Name, s.Spec.Selector)
			continue
		}
		if len(s.Spec.Ports) == 0 {
			t.Errorf("Service %s: no ports", s.Metadata.Name)
		}
		names := map[string]bool{}
		for _, p := range s.Spec.Ports {
			if p.Name == "" || names[p.Name] {
				t.Errorf("Service %s: port %d: every port needs a unique name", s.Metadata.Name, p.Port)
			}
			names[p.Name] = true
			for _, w := range ws {
				cp, ok := findPort(w, p.Target())
				if !ok {
					t.Errorf("Service %s: port %s (%d) targets %s, which no container of %s declares", s.Metadata.Name, p.Name, p.Port, p.Target(), w)
					continue
				}
				if cp.Name != p.Name || cp.ContainerPort != p.Port {
					t.Errorf("Service %s: port %s/%d reaches container port %s/%d of %s: keep names and numbers the same", s.Metadata.Name, p.Name, p.Port, cp.Name, cp.ContainerPort, w)
				}
				if proto(p.Protocol) != proto(cp.Protocol) {
					t.Errorf("Service %s: port %s: protocol %s, the container's %s", s.Metadata.Name, p.Name, proto(p.Protocol), proto(cp.Protocol))
				}
			}
		}
	}
}

func proto(p string) string {
	if p == "" {
		return "TCP"
	}
	return p
}

func TestStatefulSetHasHeadlessService(t *testing.T) {
	m := load(t)
	if len(m.StatefulSets) == 0 {
		t.Fatal("no StatefulSet")
	}
	for _, ss := range m.StatefulSets {
		s := m.Service(ss.Spec.ServiceName)
		switch {
		case ss.Spec.ServiceName == "":
			t.Errorf("StatefulSet %s: no serviceName", ss.Metadata.Name)
		case s == nil:
			t.Errorf("StatefulSet %s: serviceName %q is no Service of the manifests", ss.Metadata.Name, ss.Spec.ServiceName)
		case s.Spec.ClusterIP != "None":
			t.Errorf("StatefulSet %s: Service %s is not headless (clusterIP: None)", ss.Metadata.Name, s.Metadata.Name)
		case !SelectorMatches(s.Spec.Selector, ss.Spec.Template.Metadata.Labels):
			t.Errorf("StatefulSet %s: Service %s does not select its pods", ss.Metadata.Name, s.Metadata.Name)
		}
	}
}

// containers returns every container of every workload, with its
// workload.
func containers(m *Manifests) (out []struct {
	W Workload
	C Container
}) {
	for _, w := range m.Workloads() {
		for _, c := range slices.Concat(w.Template.Spec.InitContainers, w.Template.Spec.Containers) {
			out = append(out, struct {
				W Workload
				C Container
			}{w, c})
		}
	}
	return out
}

var fieldPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true,
	"spec.nodeName": true, "spec.serviceAccountName": true,
	"status.podIP": true, "status.podIPs": true, "status.hostIP": true,
}

func TestEnvReferencesExist(t *testing.T) {
	m := load(t)
	for _, wc := range containers(m) {
		where := fmt.Sprintf("%s container %s", wc.W, wc.C.Name)
		names := map[string]bool{}
		for _, e := range wc.C.Env {
			if e.Name == "" || names[e.Name] {
				t.Errorf("%s: env %q: empty or set twice", where, e.Name)
			}
			names[e.Name] = true
			if e.ValueFrom == nil {
				continue
			}
			if e.Value != "" {
				t.Errorf("%s: env %s has both value and valueFrom", where, e.Name)
			}
			vf := e.ValueFrom
			set := 0
			if r := vf.ConfigMapKeyRef; r != nil {
				set++
				cm := m.ConfigMap(r.Name)
				if cm == nil {
					t.Errorf("%s: env %s: no ConfigMap %q in the manifests", where, e.Name, r.Name)
				} else if _, ok := cm.Data[r.Key]; !ok && !r.IsOptional() {
					t.Errorf("%s: env %s: ConfigMap %s has no key %q (and the reference is not optional)", where, e.Name, r.Name, r.Key)
				}
			}
			if r := vf.SecretKeyRef; r != nil {
				set++
				s := m.Secret(r.Name)
				if s == nil && !r.IsOptional() {
					t.Errorf("%s: env %s: no Secret %q in the manifests (and the reference is not optional)", where, e.Name, r.Name)
				} else if s != nil && !s.HasKey(r.Key) && !r.IsOptional() {
					t.Errorf("%s: env %s: Secret %s has no key %q (and the reference is not optional)", where, e.Name, r.Name, r.Key)
				}
			}
			if r := vf.FieldRef; r != nil {
				set++
				if !fieldPaths[r.FieldPath] {
					t.Errorf("%s: env %s: fieldRef %q is not one of the pod fields the downward API gives", where, e.Name, r.FieldPath)
				}
			}
			if vf.ResourceFieldRef != nil {
				set++
			}
			if set != 1 {
				t.Errorf("%s: env %s: valueFrom needs exactly one source, has %d", where, e.Name, set)
			}
		}
		for _, ef := range wc.C.EnvFrom {
			if r := ef.ConfigMapRef; r != nil && m.ConfigMap(r.Name) == nil {
				t.Errorf("%s: envFrom: no ConfigMap %q in the manifests", where, r.Name)
			}
			if r := ef.SecretRef; r != nil && m.Secret(r.Name) == nil {
				t.Errorf("%s: envFrom: no Secret %q in the manifests", where, r.Name)
			}
		}
	}
}

// TestSecretsArePlaceholders keeps real credentials out of the
// repository: every Secret value is a marked placeholder.
func TestSecretsArePlaceholders(t *testing.T) {
	m := load(t)
	for _, s := range m.Secrets {
		if len(s.Data) > 0 {
			t.Errorf("Secret %s: data: keep the template in stringData, with placeholders", s.Metadata.Name)
		}
		if len(s.StringData) == 0 {
			t.Errorf("Secret %s: no keys", s.Metadata.Name)
		}
		for k, v := range s.StringData {
			if !strings.Contains(v, "REPLACE-ME") {
				t.Errorf("Secret %s: %s is not a placeholder (REPLACE-ME...): never commit credentials", s.Metadata.Name, k)
			}
		}
	}
}

func TestContainersResourcesAndSecurity(t *testing.T) {
	m := load(t)
	sas := map[string]bool{}
	for _, sa := range m.ServiceAccounts {
		sas[sa.Metadata.Name] = true
	}
	for _, w := range m.Workloads() {
		ps := w.Template.Spec
		if len(ps.Containers) == 0 {
			t.Errorf("%s: no containers", w)
		}
		if !sas[ps.ServiceAccountName] {
			t.Errorf("%s: serviceAccountName %q is no ServiceAccount of the manifests", w, ps.ServiceAccountName)
		}
		// SIGTERM suspends the job: give it time to.
		if g := ps.TerminationGracePeriodSeconds; g == nil || *g < 60 {
			t.Errorf("%s: terminationGracePeriodSeconds: want 60 or more, for the job to suspend on SIGTERM", w)
		}
		podNonRoot := ps.SecurityContext != nil && isTrue(ps.SecurityContext.RunAsNonRoot)
		if ps.SecurityContext != nil && ps.SecurityContext.RunAsUser != nil && *ps.SecurityContext.RunAsUser == 0 {
			t.Errorf("%s: runAsUser 0", w)
		}
		volumes := map[string]Volume{}
		for _, v := range ps.Volumes {
			volumes[v.Name] = v
		}
		for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
			where := fmt.Sprintf("%s container %s", w, c.Name)
			for _, r := range []string{"cpu", "memory"} {
				req, okr := c.Resources.Requests[r]
				lim, okl := c.Resources.Limits[r]
				if !okr || !okl {
					t.Errorf("%s: resources: want requests and limits of %s", where, r)
					continue
				}
				rq, err1 := ParseQuantity(req)
				lq, err2 := ParseQuantity(lim)
				if err1 != nil || err2 != nil {
					t.Errorf("%s: resources of %s: %v %v", where, r, err1, err2)
				} else if rq > lq {
					t.Errorf("%s: %s request %s exceeds the limit %s", where, r, req, lim)
				}
			}
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no securityContext", where)
				continue
			}
			if !podNonRoot && !isTrue(sc.RunAsNonRoot) {
				t.Errorf("%s: runAsNonRoot is not set (pod or container)", where)
			}
			if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
				t.Errorf("%s: runAsNonRoot: false", where)
			}
			if !isTrue(sc.ReadOnlyRootFilesystem) {
				t.Errorf("%s: readOnlyRootFilesystem is not true", where)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			}
			if isTrue(sc.Privileged) {
				t.Errorf("%s: privileged", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("%s: capabilities.drop does not hold ALL", where)
			}
			mounts := map[string]string{}
			for _, vm := range c.VolumeMounts {
				if _, ok := volumes[vm.Name]; !ok {
					t.Errorf("%s: volumeMount %s: no such volume in the pod", where, vm.Name)
				}
				mounts[vm.MountPath] = vm.Name
			}
			// A read-only root needs somewhere to write: /tmp and the
			// working directory (RocksDB's) on emptyDirs.
			for _, dir := range []string{"/tmp", "/var/lib/sluice"} {
				v, ok := volumes[mounts[dir]]
				if !ok || v.EmptyDir == nil {
					t.Errorf("%s: %s is not an emptyDir mount (the root file system is read-only)", where, dir)
				}
			}
			for name, p := range map[string]*Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
				if p == nil {
					t.Errorf("%s: no %s", where, name)
					continue
				}
				port, ok := p.Port()
				if !ok {
					continue
				}
				if _, ok := findPort(Workload{Template: PodTemplateSpec{Spec: PodSpec{Containers: []Container{c}}}}, port); !ok {
					t.Errorf("%s: %s probes port %s, which the container does not declare", where, name, port)
				}
			}
		}
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestOneImage: every container runs the same image, the one the
// kustomization replaces with the user's registry and tag.
func TestOneImage(t *testing.T) {
	m := load(t)
	images := map[string][]string{}
	for _, wc := range containers(m) {
		images[wc.C.Image] = append(images[wc.C.Image], wc.W.String()+"/"+wc.C.Name)
	}
	if len(images) != 1 {
		t.Fatalf("containers use %d images, want one: %v", len(images), images)
	}
	var image string
	for image = range images {
	}
	if image == "" {
		t.Fatal("containers have no image")
	}
	if m.Kustomization == nil {
		t.Fatal("no kustomization.yaml")
	}
	var names []string
	for _, im := range m.Kustomization.Images {
		names = append(names, im.Name)
	}
	if len(names) != 1 || names[0] != image {
		t.Errorf("kustomization.yaml images: %v, want one entry named %q, the containers' image", names, image)
	}
}

// TestKustomizationListsEveryFile: kubectl apply -k applies exactly the
// files here.
func TestKustomizationListsEveryFile(t *testing.T) {
	m := load(t)
	k := m.Kustomization
	if k == nil {
		t.Fatal("no kustomization.yaml")
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	if k.Namespace != "" {
		t.Errorf("kustomization.yaml sets namespace %q: the base stays namespace-agnostic", k.Namespace)
	}
	res := slices.Clone(k.Resources)
	sort.Strings(res)
	if !slices.Equal(res, m.Files) {
		t.Errorf("kustomization.yaml resources %v, files %v: list each file once", res, m.Files)
	}
}

// TestRoles pins the manifests to the binary's options: the roles, the
// listen flags and the container ports, the workers' coordinator address.
func TestRoles(t *testing.T) {
	m := load(t)
	if len(m.Deployments) != 1 || len(m.StatefulSets) != 1 {
		t.Fatalf("%d Deployments, %d StatefulSets: want the coordinator and the workers", len(m.Deployments), len(m.StatefulSets))
	}
	coord, workers := m.Deployments[0], m.StatefulSets[0]
	if r := coord.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("coordinator replicas: want 1 (a second is a standby only with HA)")
	}
	if coord.Spec.Strategy.Type != "Recreate" {
		t.Errorf("coordinator strategy %q: want Recreate, never two coordinators at once", coord.Spec.Strategy.Type)
	}
	if workers.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("workers podManagementPolicy %q, want Parallel", workers.Spec.PodManagementPolicy)
	}
	if len(m.PodDisruptionBudgets) == 0 {
		t.Error("no PodDisruptionBudget for the workers")
	}
	for _, p := range m.PodDisruptionBudgets {
		if !p.Spec.Selector.Matches(workers.Spec.Template.Metadata.Labels) {
			t.Errorf("PodDisruptionBudget %s does not select the workers", p.Metadata.Name)
		}
	}

	check := func(w Workload, role string, flagPorts map[string]string) {
		if len(w.Template.Spec.Containers) != 1 {
			t.Errorf("%s: want one container", w)
			return
		}
		c := w.Template.Spec.Containers[0]
		if v := envValue(c, "SLUICE_ROLE"); v != role {
			t.Errorf("%s: SLUICE_ROLE %q, want %q", w, v, role)
		}
		for flag, portName := range flagPorts {
			addr, ok := flagValue(c.Args, flag)
			if !ok {
				t.Errorf("%s: no --%s in args %v", w, flag, c.Args)
				continue
			}
			_, port, _ := strings.Cut(addr, ":")
			n, err := strconv.Atoi(port)
			cp, found := findPort(w, IntOrString{Str: portName})
			if err != nil || !found || cp.ContainerPort != n {
				t.Errorf("%s: --%s=%s, container port %s is %d", w, flag, addr, portName, cp.ContainerPort)
			}
		}
	}
	cw := Workload{"Deployment", coord.Metadata.Name, coord.Spec.Selector, coord.Spec.Template}
	ww := Workload{"StatefulSet", workers.Metadata.Name, workers.Spec.Selector, workers.Spec.Template}
	check(cw, "coordinator", map[string]string{"listen": "rpc", "api": "rest"})
	check(ww, "worker", map[string]string{"data-listen": "data", "metrics": "metrics"})

	// The workers' SLUICE_COORDINATOR is the coordinator's Service and its
	// rpc port.
	addr := envValue(workers.Spec.Template.Spec.Containers[0], "SLUICE_COORDINATOR")
	host, port, _ := strings.Cut(addr, ":")
	s := m.Service(host)
	if s == nil || !SelectorMatches(s.Spec.Selector, coord.Spec.Template.Metadata.Labels) {
		t.Fatalf("workers' SLUICE_COORDINATOR %q: want the coordinator's Service name and port", addr)
	}
	ok := false
	for _, p := range s.Spec.Ports {
		ok = ok || (strconv.Itoa(p.Port) == port && p.Name == "rpc")
	}
	if !ok {
		t.Errorf("workers' SLUICE_COORDINATOR %q: port %s is not the Service's rpc port", addr, port)
	}
}

func envValue(c Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// flagValue finds --name=value or --name value (one dash or two).
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// TestKubectlKustomize renders the kustomization with kubectl where it is
// installed (it needs no cluster): the same objects, the image replaced.
func TestKubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the manifests are checked by the other tests only")
	}
	m := load(t)
	out, err := exec.Command(kubectl, "kustomize", manifestsDir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", manifestsDir, err, out)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatalf("the rendered manifests: %v", err)
	}
	if len(r.Objects) != len(m.Objects) {
		t.Errorf("kubectl kustomize rendered %d objects, the files hold %d", len(r.Objects), len(m.Objects))
	}
	im := m.Kustomization.Images[0]
	want := im.NewName
	if want == "" {
		want = im.Name
	}
	if im.NewTag != "" {
		want += ":" + im.NewTag
	}
	for _, wc := range containers(r) {
		if wc.C.Image != want {
			t.Errorf("rendered %s container %s: image %q, want %q", wc.W, wc.C.Name, wc.C.Image, want)
		}
	}
}

// The Dockerfile.

func loadDockerfile(t *testing.T) *Dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	df, err := ParseDockerfile(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return df
}

// goBuild is one `go build` of a RUN line.
type goBuild struct {
	out, pkg string
	cgo      bool
	trimpath bool
}

// goBuilds finds the go build commands of a stage's RUN instructions.
func goBuilds(st Stage) []goBuild {
	var bs []goBuild
	for _, in := range st.Instructions {
		if in.Cmd != "RUN" {
			continue
		}
		for _, cmd := range regexp.MustCompile(`&&|\|\||;`).Split(in.Args, -1) {
			w := shellWords(cmd)
			var b goBuild
			i := 0
			for ; i < len(w) && strings.Contains(w[i], "="); i++ {
				b.cgo = b.cgo || w[i] == "CGO_ENABLED=1"
			}
			if i+1 >= len(w) || w[i] != "go" || w[i+1] != "build" {
				continue
			}
			for j := i + 2; j < len(w); j++ {
				a := w[j]
				switch {
				case a == "-o" && j+1 < len(w):
					b.out = w[j+1]
					j++
				case strings.HasPrefix(a, "-o="):
					b.out = a[3:]
				case a == "-trimpath":
					b.trimpath = true
				case slices.Contains([]string{"-ldflags", "-tags", "-gcflags", "-mod", "-p", "-asmflags"}, a):
					j++
				case strings.HasPrefix(a, "-"):
				default:
					b.pkg = a
				}
			}
			bs = append(bs, b)
		}
	}
	return bs
}

// shellWords splits a command line on blanks, keeping quoted parts
// together and dropping the quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func TestDockerfile(t *testing.T) {
	df := loadDockerfile(t)
	if len(df.Stages) != 2 {
		t.Fatalf("Dockerfile: %d stages, want two (build, runtime)", len(df.Stages))
	}
	build, run := df.Stages[0], df.Stages[1]
	if build.Name == "" || !strings.HasPrefix(build.Base, "golang:") || !strings.HasSuffix(build.Base, "-bookworm") {
		t.Errorf("build stage: FROM %s AS %q, want a named golang:...-bookworm stage", build.Base, build.Name)
	}
	if run.Base != "debian:bookworm-slim" {
		t.Errorf("runtime stage: FROM %s, want debian:bookworm-slim (the Debian release of the build's RocksDB)", run.Base)
	}

	// The Go of the image is the toolchain go.mod names (its toolchain
	// line, else its go line).
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^toolchain go(\d+\.\d+(?:\.\d+)?)`).FindSubmatch(gomod)
	if goVer == nil {
		goVer = regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	}
	if v, ok := df.GlobalArgs["GO_VERSION"]; ok && goVer != nil && v != string(goVer[1]) {
		t.Errorf("ARG GO_VERSION=%s, go.mod's toolchain is go%s", v, goVer[1])
	}
	// grocksdb v1.7.x is written for RocksDB 7.x: bookworm's 7.8.3,
	// librocksdb-dev in the build, librocksdb7.8 at run time. A newer
	// grocksdb needs another RocksDB, and these lines with it.
	if !regexp.MustCompile(`(?m)^\s*github\.com/linxGnu/grocksdb v1\.7\.`).Match(gomod) {
		t.Errorf("go.mod's grocksdb is not v1.7.x: check the RocksDB packages of the Dockerfile")
	}
	if !runs(build, "librocksdb-dev") || !runs(run, "librocksdb7.8") || !runs(run, "ca-certificates") {
		t.Errorf("want librocksdb-dev installed in the build stage, librocksdb7.8 and ca-certificates in the runtime stage")
	}

	// A non-root user, numeric so that runAsNonRoot can check it.
	user := ""
	for _, in := range run.Instructions {
		if in.Cmd == "USER" {
			user = in.Args
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("runtime stage: USER %q, want a numeric non-root user", user)
	}

	// The entrypoint is the program the build stage builds from $APP.
	app, ok := df.StageArg(0, "APP")
	if !ok || app == "" {
		t.Fatal("build stage: no ARG APP=<package> default")
	}
	if src, err := os.ReadFile(filepath.Join(root, app, "main.go")); err != nil || !bytes.Contains(src, []byte("package main")) {
		t.Errorf("ARG APP=%s: not a main package of the module (%v)", app, err)
	}
	built := map[string]string{} // output -> package
	for _, b := range goBuilds(build) {
		if !b.cgo || !b.trimpath || b.out == "" {
			t.Errorf("build stage: go build -o %q %s: want CGO_ENABLED=1 (RocksDB), -trimpath and -o", b.out, b.pkg)
		}
		if b.pkg == "$APP" || b.pkg == "${APP}" {
			b.pkg = app
		}
		built[b.out] = b.pkg
	}
	if !slices.Contains(slices.Collect(maps.Values(built)), "./cmd/sluice") {
		t.Errorf("build stage does not build ./cmd/sluice (built: %v)", built)
	}
	var entry []string
	copies := map[string]string{} // destination -> source in the build stage
	for _, in := range run.Instructions {
		switch in.Cmd {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.Args), &entry); err != nil || len(entry) == 0 {
				t.Errorf("ENTRYPOINT %s: want the exec form, a JSON array (so that SIGTERM reaches the program)", in.Args)
			}
		case "COPY":
			w := strings.Fields(in.Args)
			from := ""
			for len(w) > 0 && strings.HasPrefix(w[0], "--") {
				if v, ok := strings.CutPrefix(w[0], "--from="); ok {
					from = v
				}
				w = w[1:]
			}
			if from == build.Name && len(w) == 2 {
				dst := w[1]
				if strings.HasSuffix(dst, "/") {
					dst += filepath.Base(w[0])
				}
				copies[dst] = w[0]
			}
		}
	}
	if len(entry) == 0 {
		t.Fatal("runtime stage: no ENTRYPOINT")
	}
	src, ok := copies[entry[0]]
	if !ok {
		t.Fatalf("ENTRYPOINT %s is not copied from the build stage (copies: %v)", entry[0], copies)
	}
	if built[src] != app {
		t.Errorf("ENTRYPOINT %s is %s of the build stage, built from %q, want the program $APP (%s)", entry[0], src, built[src], app)
	}
}

// runs reports whether a RUN of the stage mentions word.
func runs(st Stage, word string) bool {
	for _, in := range st.Instructions {
		if in.Cmd == "RUN" && slices.Contains(strings.Fields(in.Args), word) {
			return true
		}
	}
	return false
}

// TestDockerignoreKeepsSources: the build context has every file the
// image's programs are built from (their packages' Go and cgo files and
// embedded files, go.mod, go.sum).
func TestDockerignoreKeepsSources(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var ignore []*regexp.Regexp
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not handled by this test", line)
		}
		ignore = append(ignore, dockerignoreRegexp(line))
	}
	df := loadDockerfile(t)
	app, _ := df.StageArg(0, "APP")
	cmd := exec.Command("go", "list", "-e", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}},{{join .CgoFiles ","}},{{join .EmbedFiles ","}}{{end}}{{end}}`,
		app, "./cmd/sluice")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, list, _ := strings.Cut(line, "|")
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Split(list, ",") {
			if f != "" {
				files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	if len(files) < 20 {
		t.Fatalf("go list found %d files: %v", len(files), files)
	}
	for _, f := range files {
		for _, re := range ignore {
			if re.MatchString(f) {
				t.Errorf(".dockerignore pattern %s leaves %s out of the build context", re, f)
			}
		}
	}
}

// dockerignoreRegexp turns a .dockerignore pattern into a regexp that
// matches a path it leaves out (the path or a directory above it).
func dockerignoreRegexp(p string) *regexp.Regexp {
	p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("(/.*)?$")
	return regexp.MustCompile(b.String())
}

func TestDockerignoreRegexp(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{".git", ".git/config", true},
		{".git", ".gitignore", false},
		{"deploy", "deploy/kubernetes/workers.yaml", true},
		{"**/*.test", "state/rocksdb/rocksdb.test", true},
		{"**/*.test", "x.test", true},
		{"bench*.txt", "bench.txt", true},
		{"bench*.txt", "bench/main.go", false},
		{"chk-*", "chk-3/_metadata", true},
		{"chk-*", "checkpoint/chk.go", false},
	} {
		if got := dockerignoreRegexp(c.pattern).MatchString(c.path); got != c.want {
			t.Errorf("pattern %q, path %q: %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

// TestDockerComposeParses: docker-compose.yml is YAML, every service has
// an image, and the files it mounts from the repository exist.
func TestDockerComposeParses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image   string   `yaml:"image"`
			Build   any      `yaml:"build"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var strict map[string]any
	if err := yaml.UnmarshalStrict(data, &strict); err != nil {
		t.Fatalf("docker-compose.yml (duplicate keys?): %v", err)
	}
	if len(compose.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	for name, s := range compose.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("docker-compose.yml: service %s has neither image nor build", name)
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("docker-compose.yml: service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
}

// Tests of the package's own parsing.

func TestLoadRefusesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	doc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  selector: {x: y}\n  ports:\n    - name: p\n      port: 1\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\nspec:\n  template:\n    spec:\n      containers:\n        - name: c\n          readinesProbe: {}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "readinesProbe") || !strings.Contains(err.Error(), "document 1") {
		t.Fatalf("Load of a misspelt field: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: 1}\ndata: {k: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("Load of a duplicate key: no error")
	}
}

func TestLoadMultiDocument(t *testing.T) {
	dir := t.TempDir()
	doc := "# c\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {slots: \"2\"}\n---\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{name: p, port: 80, targetPort: http}]\n---\n"
	if err := os.WriteFile(filepath.Join(dir, "x.yml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Objects) != 2 || m.ConfigMap("a").Data["slots"] != "2" || m.Service("s").Spec.Ports[0].Target() != (IntOrString{Str: "http"}) {
		t.Fatalf("objects %v", m.Objects)
	}
	if got := (ServicePort{Port: 80}).Target(); got != (IntOrString{IsInt: true, Int: 80}) {
		t.Errorf("default targetPort %v", got)
	}
}

func TestParseQuantity(t *testing.T) {
	for q, want := range map[string]float64{"250m": 0.25, "1": 1, "1.5": 1.5, "512Mi": 512 << 20, "2Gi": 2 << 30, "1G": 1e9, "100k": 1e5} {
		if got, err := ParseQuantity(q); err != nil || got != want {
			t.Errorf("ParseQuantity(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	for _, q := range []string{"", "Gi", "x", "-1", "1 Gi"} {
		if _, err := ParseQuantity(q); err == nil {
			t.Errorf("ParseQuantity(%q): no error", q)
		}
	}
}

func TestParseDockerfile(t *testing.T) {
	src := "ARG V=1\nFROM golang:${V} AS b\n# c\nRUN a \\\n  # inside\n  && b\nFROM scratch\nCOPY --from=b /x /y\nENTRYPOINT [\"/y\"]\n"
	df, err := ParseDockerfile(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if df.GlobalArgs["V"] != "1" || len(df.Stages) != 2 || df.Stages[0].Name != "b" || df.Stages[1].Base != "scratch" {
		t.Fatalf("%+v", df)
	}
	if in := df.Stages[0].Instructions[0]; in.Cmd != "RUN" || strings.Join(strings.Fields(in.Args), " ") != "a && b" || in.Line != 4 {
		t.Errorf("RUN %+v", in)
	}
	if _, err := ParseDockerfile(strings.NewReader("RUN x\n")); err == nil {
		t.Error("RUN before FROM: no error")
	}
	b := goBuilds(Stage{Instructions: []Instruction{{Cmd: "RUN", Args: `CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/app "$APP" && go build -o=/x ./cmd/y`}}})
	if len(b) != 2 || b[0] != (goBuild{out: "/out/app", pkg: "$APP", cgo: true, trimpath: true}) || b[1] != (goBuild{out: "/x", pkg: "./cmd/y"}) {
		t.Errorf("goBuilds %+v", b)
	}
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestDockerComposeApp: the app service is the Dockerfile's image of a
// main package of the module, reaches the broker on a listener the kafka
// service advertises under its service name (localhost in a container
// is the container), keeps its checkpoints in a volume at a directory
// the image's user owns, and publishes the API on the host's loopback
// only.
func TestDockerComposeApp(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	type service struct {
		Build struct {
			Context    string            `yaml:"context"`
			Dockerfile string            `yaml:"dockerfile"`
			Args       map[string]string `yaml:"args"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	}
	var compose struct {
		Services map[string]yaml.MapSlice `yaml:"services"`
		Volumes  map[string]any           `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	decode := func(name string) service {
		raw, ok := compose.Services[name]
		if !ok {
			t.Fatalf("docker-compose.yml: no %s service", name)
		}
		b, _ := yaml.Marshal(raw)
		var s service
		if err := yaml.Unmarshal(b, &s); err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		return s
	}
	app, kafka := decode("app"), decode("kafka")
	if app.Build.Context != "." || app.Build.Dockerfile != "Dockerfile" {
		t.Errorf("app builds %s/%s, want the Dockerfile at the root", app.Build.Context, app.Build.Dockerfile)
	}
	pkg := app.Build.Args["APP"]
	if m := regexp.MustCompile(`^\$\{APP:-(.+)\}$`).FindStringSubmatch(pkg); m != nil {
		pkg = m[1]
	}
	if src, err := os.ReadFile(filepath.Join(root, pkg, "main.go")); err != nil || !bytes.Contains(src, []byte("package main")) {
		t.Errorf("app: APP=%s is not a main package of the module (%v)", pkg, err)
	}
	if _, ok := app.DependsOn["kafka"]; !ok {
		t.Error("app does not depend on kafka")
	}
	// The brokers: a listener kafka advertises as kafka:<port>.
	brokers := app.Environment["KAFKA_BROKERS"]
	advertised := strings.Split(kafka.Environment["KAFKA_ADVERTISED_LISTENERS"], ",")
	found := false
	for _, l := range advertised {
		if _, hostPort, ok := strings.Cut(l, "://"); ok && hostPort == brokers {
			found = true
		}
	}
	if !found || strings.HasPrefix(brokers, "localhost") {
		t.Errorf("app's KAFKA_BROKERS %q is not one of kafka's advertised listeners %v under the service's name", brokers, advertised)
	}
	// Checkpoints and state under a named volume mounted at the image's
	// working directory, which its user owns.
	df := loadDockerfile(t)
	workdir := ""
	for _, in := range df.Stages[len(df.Stages)-1].Instructions {
		if in.Cmd == "WORKDIR" {
			workdir = in.Args
		}
	}
	mounted := ""
	for _, v := range app.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		if _, named := compose.Volumes[src]; named {
			mounted = dst
		}
	}
	if mounted == "" || mounted != workdir {
		t.Errorf("app mounts a named volume at %q, want the image's WORKDIR %q (owned by its user)", mounted, workdir)
	}
	for _, k := range []string{"SLUICE_CHECKPOINT_DIR", "SLUICE_STATE_DIR"} {
		if d := app.Environment[k]; !strings.HasPrefix(d, mounted+"/") {
			t.Errorf("app: %s=%q is not under the volume at %s", k, d, mounted)
		}
	}
	for _, p := range app.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("app publishes %s beyond the host's loopback, without a token", p)
		}
	}
	if len(app.Ports) == 0 || !strings.HasSuffix(app.Ports[0], ":8081") {
		t.Errorf("app's ports %v: want the API's 8081", app.Ports)
	}
}

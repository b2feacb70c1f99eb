package deploycheck

import (
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// tlsSecret is the Secret of the processes' certificate; tlsFiles the
// variables that name its files and the keys they must be.
const tlsSecret = "sluice-tls"

var tlsFiles = map[string]string{"SLUICE_TLS_CERT": "tls.crt", "SLUICE_TLS_KEY": "tls.key", "SLUICE_TLS_CA": "ca.crt"}

// TestInternalMutualTLS: every process runs with mutual TLS from the
// Secret sluice-tls (certificate, key, CA), mounted read-only where its
// variables point and readable by the pod's group; none is configured
// insecure.
func TestInternalMutualTLS(t *testing.T) {
	m := load(t)
	s := m.Secret(tlsSecret)
	if s == nil {
		t.Fatalf("no Secret %s (the template of the processes' certificate)", tlsSecret)
	}
	for _, key := range tlsFiles {
		if !s.HasKey(key) {
			t.Errorf("Secret %s has no %s", tlsSecret, key)
		}
	}
	for _, wc := range containers(m) {
		where := wc.W.String() + " container " + wc.C.Name
		volumes := map[string]Volume{}
		for _, v := range wc.W.Template.Spec.Volumes {
			volumes[v.Name] = v
		}
		for env, key := range tlsFiles {
			file := envValue(wc.C, env)
			if file == "" {
				t.Errorf("%s: no %s: the process would not authenticate its peers", where, env)
				continue
			}
			var mount *VolumeMount
			for i, vm := range wc.C.VolumeMounts {
				if path.Dir(file) == vm.MountPath {
					mount = &wc.C.VolumeMounts[i]
				}
			}
			if mount == nil {
				t.Errorf("%s: %s=%s is in no volume mount", where, env, file)
				continue
			}
			v := volumes[mount.Name]
			if v.Secret == nil || v.Secret.SecretName != tlsSecret || !mount.ReadOnly {
				t.Errorf("%s: %s=%s: want a read-only mount of Secret %s", where, env, file, tlsSecret)
				continue
			}
			if path.Base(file) != key {
				t.Errorf("%s: %s=%s: the Secret's key is %s", where, env, file, key)
			}
			if sc := wc.W.Template.Spec.SecurityContext; v.Secret.DefaultMode != nil && sc != nil && sc.FSGroup != nil && *v.Secret.DefaultMode&0o040 == 0 {
				t.Errorf("%s: Secret volume %s mode %o: the process (group %d) cannot read it", where, v.Name, *v.Secret.DefaultMode, *sc.FSGroup)
			}
		}
		if envValue(wc.C, "SLUICE_INSECURE") != "" || slices.Contains(wc.C.Args, "--insecure") || strings.Contains(strings.Join(wc.C.Args, " "), "security.internal.insecure") {
			t.Errorf("%s: configured insecure", where)
		}
	}
}

// TestAPIToken: the coordinator's API, which listens beyond loopback, has
// a token from a Secret.
func TestAPIToken(t *testing.T) {
	m := load(t)
	for _, wc := range containers(m) {
		if envValue(wc.C, "SLUICE_ROLE") != "coordinator" {
			continue
		}
		addr, ok := flagValue(wc.C.Args, "api")
		if !ok || strings.HasPrefix(addr, "127.0.0.1:") || strings.HasPrefix(addr, "localhost:") {
			continue
		}
		found := false
		for _, e := range wc.C.Env {
			if e.Name != "SLUICE_TOKEN" {
				continue
			}
			found = true
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || m.Secret(e.ValueFrom.SecretKeyRef.Name) == nil {
				t.Errorf("%s: SLUICE_TOKEN must come from a Secret of the manifests", wc.W)
			}
		}
		if !found {
			t.Errorf("%s: the API listens on %s without a token (SLUICE_TOKEN)", wc.W, addr)
		}
	}
}

// TestProbesUseHealthEndpoints: the probes read /healthz (liveness) and
// /readyz (readiness) over HTTP, on the API's port for the coordinator
// (which a standby serves too) and on the metrics port for a worker;
// never the control or data ports, which speak mutual TLS only.
func TestProbesUseHealthEndpoints(t *testing.T) {
	m := load(t)
	for _, wc := range containers(m) {
		port := map[string]string{"coordinator": "rest", "worker": "metrics"}[envValue(wc.C, "SLUICE_ROLE")]
		if port == "" {
			continue
		}
		for name, want := range map[string]struct {
			p    *Probe
			path string
		}{"livenessProbe": {wc.C.LivenessProbe, "/healthz"}, "readinessProbe": {wc.C.ReadinessProbe, "/readyz"}} {
			p := want.p
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want.path || p.HTTPGet.Port.String() != port {
				t.Errorf("%s: %s: want GET %s on port %s", wc.W, name, want.path, port)
			}
		}
	}
}

// TestCertManagerOverlay: cert-manager/ is the base with its
// certificate issued by cert-manager: a CA of the deployment's own (a
// self-signed issuer makes it), a CA issuer, and the processes'
// certificate for servers and clients written to sluice-tls, whose
// template the overlay deletes.
func TestCertManagerOverlay(t *testing.T) {
	dir := filepath.Join(manifestsDir, "cert-manager")
	o, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := o.Kustomization
	if k == nil {
		t.Fatal("cert-manager/: no kustomization.yaml")
	}
	res := slices.Clone(k.Resources)
	sort.Strings(res)
	if len(res) == 0 || res[0] != ".." || !slices.Equal(res[1:], o.Files) {
		t.Errorf("cert-manager/kustomization.yaml resources %v, want .. and its files %v", k.Resources, o.Files)
	}
	for _, obj := range o.Objects {
		if obj.APIVersion != "cert-manager.io/v1" || (obj.Kind != "Certificate" && obj.Kind != "Issuer") {
			t.Errorf("%s: want cert-manager.io/v1 Certificates and Issuers only", obj)
		}
	}
	issuer := map[string]*Issuer{}
	for _, i := range o.Issuers {
		issuer[i.Metadata.Name] = i
	}
	certBySecret := map[string]*Certificate{}
	for _, c := range o.Certificates {
		certBySecret[c.Spec.SecretName] = c
		if i := issuer[c.Spec.IssuerRef.Name]; i == nil || c.Spec.IssuerRef.Kind != "Issuer" {
			t.Errorf("Certificate %s: issuer %s/%s is not in the overlay", c.Metadata.Name, c.Spec.IssuerRef.Kind, c.Spec.IssuerRef.Name)
		}
	}
	leaf := certBySecret[tlsSecret]
	if leaf == nil {
		t.Fatalf("no Certificate writes %s", tlsSecret)
	}
	if leaf.Spec.IsCA || !slices.Contains(leaf.Spec.Usages, "server auth") || !slices.Contains(leaf.Spec.Usages, "client auth") {
		t.Errorf("Certificate %s: want a leaf for server auth and client auth, has isCA %t usages %v", leaf.Metadata.Name, leaf.Spec.IsCA, leaf.Spec.Usages)
	}
	ca := issuer[leaf.Spec.IssuerRef.Name]
	if ca == nil || ca.Spec.CA == nil {
		t.Fatalf("Certificate %s: its issuer must be a CA issuer of the deployment's own", leaf.Metadata.Name)
	}
	root := certBySecret[ca.Spec.CA.SecretName]
	if root == nil || !root.Spec.IsCA || issuer[root.Spec.IssuerRef.Name] == nil || issuer[root.Spec.IssuerRef.Name].Spec.SelfSigned == nil {
		t.Errorf("Issuer %s: its CA (Secret %s) must be an isCA Certificate of a self-signed issuer", ca.Metadata.Name, ca.Spec.CA.SecretName)
	}
	deleted := false
	for _, p := range k.Patches {
		if pm, ok := p.(map[any]any); ok {
			text, _ := pm["patch"].(string)
			deleted = deleted || (strings.Contains(text, "$patch: delete") && strings.Contains(text, "kind: Secret") && strings.Contains(text, "name: "+tlsSecret))
		}
	}
	if !deleted {
		t.Errorf("cert-manager/kustomization.yaml does not delete the base's template Secret %s", tlsSecret)
	}
}

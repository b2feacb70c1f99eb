// Package deploycheck reads the repository's deployment files, so that
// its test can check them offline, with no cluster and no Docker engine:
// the Kubernetes manifests under deploy/kubernetes (every document of
// every file, decoded strictly into the subset of the Kubernetes API they
// use, so that a misspelt field or a wrong type fails), their
// kustomization.yaml, the Dockerfile and docker-compose.yml. The test
// checks that the pieces fit: selectors and templates, Services and
// container ports, the StatefulSet's headless Service, ConfigMap and
// Secret keys, resources and security contexts, the image, and that the
// image's entrypoint is the program its build stage builds.
//
// The types mirror k8s.io/api's field names (the module does not depend on
// k8s.io/api); a field the manifests start to use that is not here is an
// error to fix by adding it, after checking its name in the Kubernetes API
// reference. It imports nothing of the module.
package deploycheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"
)

// TypeMeta is an object's apiVersion and kind.
type TypeMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

// ObjectMeta is the part of metadata the manifests use.
type ObjectMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// IntOrString is a field that takes a number or a name (a port, a
// disruption budget).
type IntOrString struct {
	IsInt bool
	Int   int
	Str   string
}

// UnmarshalYAML takes an integer or a string.
func (v *IntOrString) UnmarshalYAML(unmarshal func(any) error) error {
	var i int
	if err := unmarshal(&i); err == nil {
		*v = IntOrString{IsInt: true, Int: i}
		return nil
	}
	var s string
	if err := unmarshal(&s); err != nil {
		return fmt.Errorf("want an integer or a string: %w", err)
	}
	*v = IntOrString{Str: s}
	return nil
}

func (v IntOrString) String() string {
	if v.IsInt {
		return strconv.Itoa(v.Int)
	}
	return v.Str
}

// IsZero reports whether the field was absent.
func (v IntOrString) IsZero() bool { return !v.IsInt && v.Str == "" }

// LabelSelector selects by labels.
type LabelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []any             `yaml:"matchExpressions"`
}

// Matches reports whether labels carry every one of the selector's
// matchLabels (matchExpressions are not evaluated: the test refuses them).
func (s LabelSelector) Matches(labels map[string]string) bool {
	return len(s.MatchLabels) > 0 && SelectorMatches(s.MatchLabels, labels)
}

// SelectorMatches reports whether labels carry every key and value of sel
// (an empty sel selects nothing here).
func SelectorMatches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Deployment is apps/v1 Deployment.
type Deployment struct {
	TypeMeta `yaml:",inline"`
	Metadata ObjectMeta     `yaml:"metadata"`
	Spec     DeploymentSpec `yaml:"spec"`
}

// DeploymentSpec is a Deployment's spec.
type DeploymentSpec struct {
	Replicas                *int               `yaml:"replicas"`
	Selector                LabelSelector      `yaml:"selector"`
	Template                PodTemplateSpec    `yaml:"template"`
	Strategy                DeploymentStrategy `yaml:"strategy"`
	RevisionHistoryLimit    *int               `yaml:"revisionHistoryLimit"`
	MinReadySeconds         int                `yaml:"minReadySeconds"`
	ProgressDeadlineSeconds *int               `yaml:"progressDeadlineSeconds"`
	Paused                  bool               `yaml:"paused"`
}

// DeploymentStrategy is Recreate or RollingUpdate.
type DeploymentStrategy struct {
	Type          string `yaml:"type"`
	RollingUpdate *struct {
		MaxSurge       IntOrString `yaml:"maxSurge"`
		MaxUnavailable IntOrString `yaml:"maxUnavailable"`
	} `yaml:"rollingUpdate"`
}

// StatefulSet is apps/v1 StatefulSet.
type StatefulSet struct {
	TypeMeta `yaml:",inline"`
	Metadata ObjectMeta      `yaml:"metadata"`
	Spec     StatefulSetSpec `yaml:"spec"`
}

// StatefulSetSpec is a StatefulSet's spec.
type StatefulSetSpec struct {
	ServiceName          string          `yaml:"serviceName"`
	Replicas             *int            `yaml:"replicas"`
	PodManagementPolicy  string          `yaml:"podManagementPolicy"`
	Selector             LabelSelector   `yaml:"selector"`
	Template             PodTemplateSpec `yaml:"template"`
	RevisionHistoryLimit *int            `yaml:"revisionHistoryLimit"`
	MinReadySeconds      int             `yaml:"minReadySeconds"`
	UpdateStrategy       struct {
		Type          string `yaml:"type"`
		RollingUpdate *struct {
			Partition      *int        `yaml:"partition"`
			MaxUnavailable IntOrString `yaml:"maxUnavailable"`
		} `yaml:"rollingUpdate"`
	} `yaml:"updateStrategy"`
	VolumeClaimTemplates                 []any `yaml:"volumeClaimTemplates"`
	PersistentVolumeClaimRetentionPolicy any   `yaml:"persistentVolumeClaimRetentionPolicy"`
}

// PodTemplateSpec is a workload's pod template.
type PodTemplateSpec struct {
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     PodSpec    `yaml:"spec"`
}

// PodSpec is the part of a pod's spec the manifests use; affinity,
// tolerations and the like are kept undecoded.
type PodSpec struct {
	ServiceAccountName            string              `yaml:"serviceAccountName"`
	AutomountServiceAccountToken  *bool               `yaml:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds *int                `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               *PodSecurityContext `yaml:"securityContext"`
	Containers                    []Container         `yaml:"containers"`
	InitContainers                []Container         `yaml:"initContainers"`
	Volumes                       []Volume            `yaml:"volumes"`
	EnableServiceLinks            *bool               `yaml:"enableServiceLinks"`
	PriorityClassName             string              `yaml:"priorityClassName"`
	NodeSelector                  map[string]string   `yaml:"nodeSelector"`
	ImagePullSecrets              []struct {
		Name string `yaml:"name"`
	} `yaml:"imagePullSecrets"`
	Affinity                  any `yaml:"affinity"`
	Tolerations               any `yaml:"tolerations"`
	TopologySpreadConstraints any `yaml:"topologySpreadConstraints"`
}

// PodSecurityContext is a pod's securityContext.
type PodSecurityContext struct {
	RunAsNonRoot        *bool           `yaml:"runAsNonRoot"`
	RunAsUser           *int64          `yaml:"runAsUser"`
	RunAsGroup          *int64          `yaml:"runAsGroup"`
	FSGroup             *int64          `yaml:"fsGroup"`
	FSGroupChangePolicy string          `yaml:"fsGroupChangePolicy"`
	SupplementalGroups  []int64         `yaml:"supplementalGroups"`
	SeccompProfile      *SeccompProfile `yaml:"seccompProfile"`
}

// SeccompProfile is RuntimeDefault, Localhost or Unconfined.
type SeccompProfile struct {
	Type             string `yaml:"type"`
	LocalhostProfile string `yaml:"localhostProfile"`
}

// Container is the part of a container the manifests use.
type Container struct {
	Name            string                    `yaml:"name"`
	Image           string                    `yaml:"image"`
	ImagePullPolicy string                    `yaml:"imagePullPolicy"`
	Command         []string                  `yaml:"command"`
	Args            []string                  `yaml:"args"`
	WorkingDir      string                    `yaml:"workingDir"`
	Env             []EnvVar                  `yaml:"env"`
	EnvFrom         []EnvFromSource           `yaml:"envFrom"`
	Ports           []ContainerPort           `yaml:"ports"`
	ReadinessProbe  *Probe                    `yaml:"readinessProbe"`
	LivenessProbe   *Probe                    `yaml:"livenessProbe"`
	StartupProbe    *Probe                    `yaml:"startupProbe"`
	Resources       ResourceRequirements      `yaml:"resources"`
	SecurityContext *ContainerSecurityContext `yaml:"securityContext"`
	VolumeMounts    []VolumeMount             `yaml:"volumeMounts"`
	Lifecycle       any                       `yaml:"lifecycle"`
}

// EnvVar is one environment variable: a value, or one from elsewhere.
type EnvVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			APIVersion string `yaml:"apiVersion"`
			FieldPath  string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		ResourceFieldRef *struct {
			ContainerName string `yaml:"containerName"`
			Resource      string `yaml:"resource"`
			Divisor       string `yaml:"divisor"`
		} `yaml:"resourceFieldRef"`
		ConfigMapKeyRef *KeyRef `yaml:"configMapKeyRef"`
		SecretKeyRef    *KeyRef `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

// KeyRef names a key of a ConfigMap or a Secret.
type KeyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional *bool  `yaml:"optional"`
}

// IsOptional reports whether the reference may be missing.
func (r KeyRef) IsOptional() bool { return r.Optional != nil && *r.Optional }

// EnvFromSource imports every key of a ConfigMap or Secret.
type EnvFromSource struct {
	Prefix       string `yaml:"prefix"`
	ConfigMapRef *struct {
		Name     string `yaml:"name"`
		Optional *bool  `yaml:"optional"`
	} `yaml:"configMapRef"`
	SecretRef *struct {
		Name     string `yaml:"name"`
		Optional *bool  `yaml:"optional"`
	} `yaml:"secretRef"`
}

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
	Protocol      string `yaml:"protocol"`
}

// Probe is a readiness, liveness or startup probe.
type Probe struct {
	TCPSocket *struct {
		Port IntOrString `yaml:"port"`
		Host string      `yaml:"host"`
	} `yaml:"tcpSocket"`
	HTTPGet *struct {
		Path        string      `yaml:"path"`
		Port        IntOrString `yaml:"port"`
		Scheme      string      `yaml:"scheme"`
		HTTPHeaders []any       `yaml:"httpHeaders"`
	} `yaml:"httpGet"`
	GRPC *struct {
		Port    int    `yaml:"port"`
		Service string `yaml:"service"`
	} `yaml:"grpc"`
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
	InitialDelaySeconds           int  `yaml:"initialDelaySeconds"`
	PeriodSeconds                 int  `yaml:"periodSeconds"`
	TimeoutSeconds                int  `yaml:"timeoutSeconds"`
	SuccessThreshold              int  `yaml:"successThreshold"`
	FailureThreshold              int  `yaml:"failureThreshold"`
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
}

// Port is the port the probe connects to, and whether it has one (an exec
// probe has none).
func (p Probe) Port() (IntOrString, bool) {
	switch {
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.GRPC != nil:
		return IntOrString{IsInt: true, Int: p.GRPC.Port}, true
	}
	return IntOrString{}, false
}

// ResourceRequirements are a container's requests and limits, as
// Kubernetes quantities ("250m", "2Gi").
type ResourceRequirements struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

// ContainerSecurityContext is a container's securityContext.
type ContainerSecurityContext struct {
	RunAsNonRoot             *bool           `yaml:"runAsNonRoot"`
	RunAsUser                *int64          `yaml:"runAsUser"`
	RunAsGroup               *int64          `yaml:"runAsGroup"`
	AllowPrivilegeEscalation *bool           `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool           `yaml:"readOnlyRootFilesystem"`
	Privileged               *bool           `yaml:"privileged"`
	SeccompProfile           *SeccompProfile `yaml:"seccompProfile"`
	Capabilities             *struct {
		Add  []string `yaml:"add"`
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

// VolumeMount mounts a pod volume into a container.
type VolumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	SubPath   string `yaml:"subPath"`
	ReadOnly  bool   `yaml:"readOnly"`
}

// Volume is a pod volume; the kinds other than emptyDir are kept
// undecoded.
type Volume struct {
	Name     string `yaml:"name"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
	ConfigMap             any                 `yaml:"configMap"`
	Secret                *SecretVolumeSource `yaml:"secret"`
	PersistentVolumeClaim any                 `yaml:"persistentVolumeClaim"`
	Projected             any                 `yaml:"projected"`
}

// SecretVolumeSource mounts a Secret's keys as files.
type SecretVolumeSource struct {
	SecretName  string `yaml:"secretName"`
	DefaultMode *int   `yaml:"defaultMode"`
	Optional    *bool  `yaml:"optional"`
	Items       []struct {
		Key  string `yaml:"key"`
		Path string `yaml:"path"`
		Mode *int   `yaml:"mode"`
	} `yaml:"items"`
}

// Certificate is cert-manager.io/v1 Certificate: the fields the overlay
// uses.
type Certificate struct {
	TypeMeta `yaml:",inline"`
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     struct {
		IsCA        bool     `yaml:"isCA"`
		CommonName  string   `yaml:"commonName"`
		DNSNames    []string `yaml:"dnsNames"`
		IPAddresses []string `yaml:"ipAddresses"`
		SecretName  string   `yaml:"secretName"`
		Duration    string   `yaml:"duration"`
		RenewBefore string   `yaml:"renewBefore"`
		Usages      []string `yaml:"usages"`
		PrivateKey  *struct {
			Algorithm      string `yaml:"algorithm"`
			Size           int    `yaml:"size"`
			RotationPolicy string `yaml:"rotationPolicy"`
		} `yaml:"privateKey"`
		IssuerRef struct {
			Name  string `yaml:"name"`
			Kind  string `yaml:"kind"`
			Group string `yaml:"group"`
		} `yaml:"issuerRef"`
	} `yaml:"spec"`
}

// Issuer is cert-manager.io/v1 Issuer: self-signed or a CA.
type Issuer struct {
	TypeMeta `yaml:",inline"`
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     struct {
		SelfSigned *struct{} `yaml:"selfSigned"`
		CA         *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"ca"`
	} `yaml:"spec"`
}

// Service is v1 Service.
type Service struct {
	TypeMeta `yaml:",inline"`
	Metadata ObjectMeta  `yaml:"metadata"`
	Spec     ServiceSpec `yaml:"spec"`
}

// ServiceSpec is a Service's spec.
type ServiceSpec struct {
	Type                     string            `yaml:"type"`
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []ServicePort     `yaml:"ports"`
	SessionAffinity          string            `yaml:"sessionAffinity"`
	InternalTrafficPolicy    string            `yaml:"internalTrafficPolicy"`
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name        string      `yaml:"name"`
	Port        int         `yaml:"port"`
	TargetPort  IntOrString `yaml:"targetPort"`
	Protocol    string      `yaml:"protocol"`
	AppProtocol string      `yaml:"appProtocol"`
	NodePort    int         `yaml:"nodePort"`
}

// Target is the container port the Service port sends to: targetPort,
// else the same number as port.
func (p ServicePort) Target() IntOrString {
	if p.TargetPort.IsZero() {
		return IntOrString{IsInt: true, Int: p.Port}
	}
	return p.TargetPort
}

// ConfigMap is v1 ConfigMap.
type ConfigMap struct {
	TypeMeta   `yaml:",inline"`
	Metadata   ObjectMeta        `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	BinaryData map[string]string `yaml:"binaryData"`
	Immutable  *bool             `yaml:"immutable"`
}

// Secret is v1 Secret.
type Secret struct {
	TypeMeta   `yaml:",inline"`
	Metadata   ObjectMeta        `yaml:"metadata"`
	Type       string            `yaml:"type"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Immutable  *bool             `yaml:"immutable"`
}

// HasKey reports whether the Secret defines key, in data or stringData.
func (s Secret) HasKey(key string) bool {
	_, d := s.Data[key]
	_, sd := s.StringData[key]
	return d || sd
}

// ServiceAccount is v1 ServiceAccount.
type ServiceAccount struct {
	TypeMeta                     `yaml:",inline"`
	Metadata                     ObjectMeta `yaml:"metadata"`
	AutomountServiceAccountToken *bool      `yaml:"automountServiceAccountToken"`
	ImagePullSecrets             []any      `yaml:"imagePullSecrets"`
}

// PodDisruptionBudget is policy/v1 PodDisruptionBudget.
type PodDisruptionBudget struct {
	TypeMeta `yaml:",inline"`
	Metadata ObjectMeta `yaml:"metadata"`
	Spec     struct {
		MinAvailable               IntOrString   `yaml:"minAvailable"`
		MaxUnavailable             IntOrString   `yaml:"maxUnavailable"`
		Selector                   LabelSelector `yaml:"selector"`
		UnhealthyPodEvictionPolicy string        `yaml:"unhealthyPodEvictionPolicy"`
	} `yaml:"spec"`
}

// Kustomization is kustomization.yaml: the fields a base like this one
// uses, the others kept undecoded.
type Kustomization struct {
	TypeMeta           `yaml:",inline"`
	Namespace          string            `yaml:"namespace"`
	NamePrefix         string            `yaml:"namePrefix"`
	NameSuffix         string            `yaml:"nameSuffix"`
	Resources          []string          `yaml:"resources"`
	Images             []KustomizeImage  `yaml:"images"`
	Labels             []any             `yaml:"labels"`
	CommonAnnotations  map[string]string `yaml:"commonAnnotations"`
	Patches            []any             `yaml:"patches"`
	ConfigMapGenerator []any             `yaml:"configMapGenerator"`
	SecretGenerator    []any             `yaml:"secretGenerator"`
	GeneratorOptions   any               `yaml:"generatorOptions"`
}

// KustomizeImage replaces an image's name, tag or digest.
type KustomizeImage struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
	Digest  string `yaml:"digest"`
}

// Object is one document of a manifest file.
type Object struct {
	// File is the file's path relative to the manifests' directory, Index
	// the document's position in it (from 0).
	File  string
	Index int
	TypeMeta
	Metadata ObjectMeta
	// Value is the decoded document: a *Deployment, *StatefulSet,
	// *Service, *ConfigMap, *Secret, *ServiceAccount,
	// *PodDisruptionBudget, *Certificate or *Issuer, or nil for a kind
	// this package does not know (the test refuses those).
	Value any
}

func (o Object) String() string {
	return fmt.Sprintf("%s#%d %s/%s", o.File, o.Index, o.Kind, o.Metadata.Name)
}

// Manifests is every document under a directory, by kind.
type Manifests struct {
	Dir string
	// Files are the YAML files found, kustomization.yaml excluded,
	// relative to Dir with forward slashes, sorted.
	Files                []string
	Objects              []Object
	Kustomization        *Kustomization
	Deployments          []*Deployment
	StatefulSets         []*StatefulSet
	Services             []*Service
	ConfigMaps           []*ConfigMap
	Secrets              []*Secret
	ServiceAccounts      []*ServiceAccount
	PodDisruptionBudgets []*PodDisruptionBudget
	Certificates         []*Certificate
	Issuers              []*Issuer
}

// Workload is a Deployment's or a StatefulSet's pods.
type Workload struct {
	Kind, Name string
	Selector   LabelSelector
	Template   PodTemplateSpec
}

func (w Workload) String() string { return w.Kind + "/" + w.Name }

// Workloads are the Deployments and StatefulSets.
func (m *Manifests) Workloads() []Workload {
	var ws []Workload
	for _, d := range m.Deployments {
		ws = append(ws, Workload{"Deployment", d.Metadata.Name, d.Spec.Selector, d.Spec.Template})
	}
	for _, s := range m.StatefulSets {
		ws = append(ws, Workload{"StatefulSet", s.Metadata.Name, s.Spec.Selector, s.Spec.Template})
	}
	return ws
}

// ConfigMap returns the ConfigMap named name, or nil.
func (m *Manifests) ConfigMap(name string) *ConfigMap {
	for _, c := range m.ConfigMaps {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// Secret returns the Secret named name, or nil.
func (m *Manifests) Secret(name string) *Secret {
	for _, s := range m.Secrets {
		if s.Metadata.Name == name {
			return s
		}
	}
	return nil
}

// Service returns the Service named name, or nil.
func (m *Manifests) Service(name string) *Service {
	for _, s := range m.Services {
		if s.Metadata.Name == name {
			return s
		}
	}
	return nil
}

// KustomizationFile is the name of the kustomization in a manifests'
// directory.
const KustomizationFile = "kustomization.yaml"

// Load reads every *.yaml and *.yml file under dir: kustomization.yaml
// into Kustomization, every document of the others into Objects and the
// list of its kind. A subdirectory with a kustomization.yaml of its own
// is an overlay, left to a Load of its own. A document that is not YAML, has a duplicate key, or
// has a field its kind's type lacks is an error naming the file, the
// document and the field.
func Load(dir string) (*Manifests, error) {
	m := &Manifests{Dir: dir}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir {
				if _, serr := os.Stat(filepath.Join(path, KustomizationFile)); serr == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		ext := filepath.Ext(path)
		if ext != ".yaml" && ext != ".yml" {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == KustomizationFile {
			var k Kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			m.Kustomization = &k
			return nil
		}
		m.Files = append(m.Files, rel)
		return m.addFile(rel, data)
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(m.Files)
	return m, nil
}

// addFile decodes every document of a file: first as YAML (strictly, so
// that a duplicate key fails), then, encoded again, strictly into its
// kind's type.
func (m *Manifests) addFile(rel string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.SetStrict(true)
	for i := 0; ; i++ {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", rel, i, err)
		}
		if doc == nil {
			continue // an empty document (a trailing ---)
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", rel, i, err)
		}
		var head struct {
			TypeMeta `yaml:",inline"`
			Metadata ObjectMeta `yaml:"metadata"`
		}
		if err := yaml.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("%s: document %d: %w", rel, i, err)
		}
		o := Object{File: rel, Index: i, TypeMeta: head.TypeMeta, Metadata: head.Metadata}
		var v any
		switch head.Kind {
		case "Deployment":
			d := &Deployment{}
			m.Deployments, v = append(m.Deployments, d), d
		case "StatefulSet":
			s := &StatefulSet{}
			m.StatefulSets, v = append(m.StatefulSets, s), s
		case "Service":
			s := &Service{}
			m.Services, v = append(m.Services, s), s
		case "ConfigMap":
			c := &ConfigMap{}
			m.ConfigMaps, v = append(m.ConfigMaps, c), c
		case "Secret":
			s := &Secret{}
			m.Secrets, v = append(m.Secrets, s), s
		case "ServiceAccount":
			s := &ServiceAccount{}
			m.ServiceAccounts, v = append(m.ServiceAccounts, s), s
		case "PodDisruptionBudget":
			p := &PodDisruptionBudget{}
			m.PodDisruptionBudgets, v = append(m.PodDisruptionBudgets, p), p
		case "Certificate":
			c := &Certificate{}
			m.Certificates, v = append(m.Certificates, c), c
		case "Issuer":
			i := &Issuer{}
			m.Issuers, v = append(m.Issuers, i), i
		}
		if v != nil {
			if err := yaml.UnmarshalStrict(raw, v); err != nil {
				return fmt.Errorf("%s: document %d (%s %q): %w", rel, i, head.Kind, head.Metadata.Name, err)
			}
			o.Value = v
		}
		m.Objects = append(m.Objects, o)
	}
}

// ParseQuantity reads a Kubernetes quantity ("250m", "1", "1.5", "512Mi",
// "2G") as a number of base units (cores, bytes).
func ParseQuantity(q string) (float64, error) {
	suffixes := []struct {
		s string
		f float64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"n", 1e-9}, {"u", 1e-6}, {"m", 1e-3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
	}
	num, f := q, 1.0
	for _, s := range suffixes {
		if n, ok := strings.CutSuffix(q, s.s); ok {
			num, f = n, s.f
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || num == "" {
		return 0, fmt.Errorf("quantity %q: not a number with a Kubernetes suffix", q)
	}
	return v * f, nil
}

// Instruction is one Dockerfile instruction, its continuation lines
// joined.
type Instruction struct {
	Line int    // where it starts, from 1
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
}

// Stage is a Dockerfile build stage: its FROM and what follows it.
type Stage struct {
	Base, Name   string
	Instructions []Instruction
}

// Dockerfile is a parsed Dockerfile: the ARGs before the first FROM, and
// the stages.
type Dockerfile struct {
	GlobalArgs map[string]string
	Stages     []Stage
}

// ParseDockerfile reads a Dockerfile: comment lines, continuation
// lines ending in a backslash, instructions by stage. It does not expand
// variables, parser directives or heredocs.
func ParseDockerfile(r io.Reader) (*Dockerfile, error) {
	df := &Dockerfile{GlobalArgs: map[string]string{}}
	sc := bufio.NewScanner(r)
	var cur strings.Builder
	start, n := 0, 0
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := Instruction{Line: start, Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		switch {
		case in.Cmd == "FROM":
			f := strings.Fields(in.Args)
			var st Stage
			for len(f) > 0 && strings.HasPrefix(f[0], "--") { // --platform=...
				f = f[1:]
			}
			if len(f) == 0 {
				return fmt.Errorf("line %d: FROM without an image", start)
			}
			st.Base = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			} else if len(f) != 1 {
				return fmt.Errorf("line %d: FROM %s: want IMAGE [AS NAME]", start, in.Args)
			}
			df.Stages = append(df.Stages, st)
		case len(df.Stages) == 0:
			if in.Cmd != "ARG" {
				return fmt.Errorf("line %d: %s before the first FROM", start, in.Cmd)
			}
			k, v, _ := strings.Cut(in.Args, "=")
			df.GlobalArgs[k] = v
		default:
			last := &df.Stages[len(df.Stages)-1]
			last.Instructions = append(last.Instructions, in)
		}
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment, also inside a continued instruction
		}
		if cur.Len() == 0 {
			if trimmed == "" {
				continue
			}
			start = n
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			cur.WriteString(body)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: the last instruction ends with a backslash", start)
	}
	return df, nil
}

// StageArg returns the default of an ARG of stage (an ARG without one, or
// a missing ARG, gives "" and false), falling back to the global ARG of
// the same name.
func (df *Dockerfile) StageArg(stage int, name string) (string, bool) {
	for _, in := range df.Stages[stage].Instructions {
		if in.Cmd != "ARG" {
			continue
		}
		k, v, hasDefault := strings.Cut(in.Args, "=")
		if k == name {
			if hasDefault {
				return strings.Trim(v, `"`), true
			}
			v, ok := df.GlobalArgs[name]
			return strings.Trim(v, `"`), ok
		}
	}
	v, ok := df.GlobalArgs[name]
	return strings.Trim(v, `"`), ok
}

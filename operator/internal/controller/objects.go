package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
)

// The ports every process listens on (Flink's defaults).
const (
	PortRPC     = 6123 // jobmanager.rpc.port: the control plane
	PortREST    = 8081 // rest.port: the REST API, /healthz, /readyz
	PortData    = 6121 // taskmanager.data.port: the data plane
	PortMetrics = 9249 // metrics.reporter.prom.port: a worker's /metrics, /healthz, /readyz
)

// Labels and annotations the operator puts on its objects.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// AnnotationSpecHash on a pod template identifies the spec its
	// processes run: a change of it is a new version.
	AnnotationSpecHash = "sluice.sluicehq.dev/spec-hash"

	ComponentCoordinator = "coordinator"
	ComponentWorker      = "worker"
	managedBy            = "sluice-operator"

	// propertiesKey is the ConfigMap's key holding the configuration,
	// given to the processes as $SLUICE_PROPERTIES.
	propertiesKey = "config.yaml"
	stateDir      = "/var/lib/sluice"
	tlsDir        = "/etc/sluice/tls"
)

// Names of the objects of a SluiceJob.
func coordinatorName(j *sluicev1.SluiceJob) string { return j.Name + "-coordinator" }
func workerName(j *sluicev1.SluiceJob) string      { return j.Name + "-worker" }
func workersService(j *sluicev1.SluiceJob) string  { return j.Name + "-workers" }
func configMapName(j *sluicev1.SluiceJob) string   { return j.Name + "-config" }

// CoordinatorService is the DNS name and port of a job's coordinator
// Service (control plane on PortRPC, REST on PortREST).
func CoordinatorService(j *sluicev1.SluiceJob) string {
	return coordinatorName(j) + "." + j.Namespace + ".svc"
}

func labels(j *sluicev1.SluiceJob, component string) map[string]string {
	l := map[string]string{LabelName: "sluice", LabelInstance: j.Name, LabelManagedBy: managedBy}
	if component != "" {
		l[LabelComponent] = component
	}
	return l
}

func selector(j *sluicev1.SluiceJob, component string) map[string]string {
	return map[string]string{LabelName: "sluice", LabelInstance: j.Name, LabelComponent: component}
}

// deployment is what the processes start from: a spec, the snapshot they
// restore and the checkpoint epoch. running says whether processes run
// (false while an upgrade drains the old version).
type deployment struct {
	spec        *sluicev1.SluiceJobSpec
	restorePath string
	epoch       int32
	running     bool
}

// workers is the number of worker processes a spec asks for.
func workers(s *sluicev1.SluiceJobSpec) int32 {
	if s.Workers != nil {
		return *s.Workers
	}
	slots := max(s.Slots, 1)
	return max((max(s.Parallelism, 1)+slots-1)/slots, 1)
}

// checkpointDir is the directory the processes checkpoint into: the
// spec's, and a directory of its own per epoch after a stateless upgrade.
func checkpointDir(s *sluicev1.SluiceJobSpec, epoch int32) string {
	if epoch == 0 {
		return s.CheckpointDir
	}
	return strings.TrimRight(s.CheckpointDir, "/") + "/epoch-" + strconv.Itoa(int(epoch))
}

// versionHash identifies what a change of requires new processes: the
// spec without the parallelism (a rescale), the savepoint schedule and
// the upgrade settings.
func versionHash(s *sluicev1.SluiceJobSpec) string {
	c := s.DeepCopy()
	c.Parallelism, c.Workers = 0, nil
	c.Savepoints, c.Upgrade = sluicev1.SavepointSpec{}, sluicev1.UpgradeSpec{}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// properties is the processes' configuration in config.yaml's shape.
func properties(d deployment) string {
	s := d.spec
	conf := maps.Clone(s.Configuration)
	if conf == nil {
		conf = map[string]string{}
	}
	conf["execution.checkpointing.dir"] = checkpointDir(s, d.epoch)
	if s.SavepointDir != "" {
		conf["execution.checkpointing.savepoint-dir"] = s.SavepointDir
	}
	conf["parallelism.default"] = strconv.Itoa(int(max(s.Parallelism, 1)))
	if d.restorePath != "" {
		conf["execution.state-recovery.path"] = d.restorePath
	}
	var b strings.Builder
	b.WriteString("# Written by the sluice operator from the SluiceJob's spec; changes here are overwritten.\n")
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		v, _ := json.Marshal(conf[k])
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	return b.String()
}

func configMap(j *sluicev1.SluiceJob, d deployment) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(j), Namespace: j.Namespace, Labels: labels(j, "")},
		Data:       map[string]string{propertiesKey: properties(d)},
	}
}

func envValue(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// commonEnv are the variables of every process.
func commonEnv(j *sluicev1.SluiceJob, d deployment, role string) []corev1.EnvVar {
	s := d.spec
	env := []corev1.EnvVar{
		{Name: "SLUICE_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "SLUICE_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		envValue("SLUICE_ROLE", role),
		envValue("SLUICE_HOST", "$(SLUICE_POD_IP)"),
		{Name: "SLUICE_PROPERTIES", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(j)}, Key: propertiesKey}}},
		// The checkpoint and state directories, for programs that read
		// them as variables (examples/wordcountd); the configuration has
		// the checkpoint directory too.
		envValue("SLUICE_CHECKPOINT_DIR", checkpointDir(s, d.epoch)),
		envValue("SLUICE_STATE_DIR", stateDir),
		envValue("SLUICE_SLOTS", strconv.Itoa(int(max(s.Slots, 1)))),
		// Prometheus' reporter on the pod's address (a worker's /metrics,
		// /healthz and /readyz; a coordinator serves them on its API).
		envValue("SLUICE_CONF_METRICS_REPORTER_PROM_HOST", "$(SLUICE_POD_IP)"),
		envValue("SLUICE_CONF_METRICS_REPORTER_PROM_PORT", strconv.Itoa(PortMetrics)),
	}
	sec := s.Security
	if sec.TLSSecretName != "" {
		env = append(env, envValue("SLUICE_TLS_CERT", tlsDir+"/tls.crt"), envValue("SLUICE_TLS_KEY", tlsDir+"/tls.key"),
			envValue("SLUICE_TLS_CA", tlsDir+"/ca.crt"))
	}
	if sec.InternalSecret != nil {
		env = append(env, corev1.EnvVar{Name: "SLUICE_INTERNAL_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sec.InternalSecret.DeepCopy()}})
	}
	if sec.Insecure {
		env = append(env, envValue("SLUICE_INSECURE", "true"))
	}
	if ha := s.HA; ha != nil {
		env = append(env, envValue("SLUICE_HA_ETCD_ENDPOINTS", strings.Join(ha.EtcdEndpoints, ",")),
			envValue("SLUICE_CONF_HIGH_AVAILABILITY_ETCD_PATH_ROOT", "/sluice/"+j.Namespace+"/"+j.Name))
		if ha.CredentialsSecretName != "" {
			for _, k := range []string{"SLUICE_HA_ETCD_USERNAME", "SLUICE_HA_ETCD_PASSWORD"} {
				opt := true
				env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: ha.CredentialsSecretName}, Key: k, Optional: &opt}}})
			}
		}
	}
	return env
}

// container is the process of a role.
func container(j *sluicev1.SluiceJob, d deployment, role string) corev1.Container {
	s := d.spec
	env := commonEnv(j, d, role)
	args := slices.Clone(s.Args)
	var ports []corev1.ContainerPort
	var probePort string
	probeScheme := corev1.URISchemeHTTP
	switch role {
	case ComponentCoordinator:
		// Every listener on the pod's address: the Service, the workers
		// and the probes reach it there.
		args = append(args, fmt.Sprintf("--listen=$(SLUICE_POD_IP):%d", PortRPC))
		env = append(env, envValue("SLUICE_CONF_REST_BIND_ADDRESS", "$(SLUICE_POD_IP)"),
			envValue("SLUICE_CONF_REST_PORT", strconv.Itoa(PortREST)))
		if t := s.Security.RESTToken; t != nil {
			env = append(env, corev1.EnvVar{Name: "SLUICE_CONF_REST_AUTHENTICATION_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: t.DeepCopy()}})
		}
		if s.Security.TLSSecretName != "" {
			// The REST API over HTTPS with the same certificate: the
			// operator verifies it for the Service's name.
			env = append(env, envValue("SLUICE_CONF_SECURITY_SSL_REST_CERT_FILE", tlsDir+"/tls.crt"),
				envValue("SLUICE_CONF_SECURITY_SSL_REST_KEY_FILE", tlsDir+"/tls.key"))
			probeScheme = corev1.URISchemeHTTPS
		}
		ports = []corev1.ContainerPort{{Name: "rpc", ContainerPort: PortRPC}, {Name: "rest", ContainerPort: PortREST}}
		probePort = "rest"
	case ComponentWorker:
		args = append(args, fmt.Sprintf("--data-listen=$(SLUICE_POD_IP):%d", PortData))
		if s.HA == nil {
			env = append(env, envValue("SLUICE_COORDINATOR", fmt.Sprintf("%s:%d", CoordinatorService(j), PortRPC)))
		}
		env = append(env,
			corev1.EnvVar{Name: "SLUICE_WORKER_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
		ports = []corev1.ContainerPort{{Name: "data", ContainerPort: PortData}, {Name: "metrics", ContainerPort: PortMetrics}}
		probePort = "metrics"
	}
	env = append(env, s.Env...)
	mounts := []corev1.VolumeMount{{Name: "work", MountPath: stateDir}, {Name: "tmp", MountPath: "/tmp"}}
	if s.Security.TLSSecretName != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "tls", MountPath: tlsDir, ReadOnly: true})
	}
	pod := s.Coordinator
	if role == ComponentWorker {
		pod = s.Worker
	}
	f := false
	return corev1.Container{
		Name:            role,
		Image:           s.Image,
		ImagePullPolicy: s.ImagePullPolicy,
		Args:            args,
		Env:             env,
		Ports:           ports,
		// /readyz: the job runs (a worker: its tasks run), or the
		// coordinator stands by for the leadership under HA. /healthz:
		// the process answers, a standby too, so that a standby, which
		// does not serve the control plane until elected, is never
		// restarted for it.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(probePort), Scheme: probeScheme}},
			PeriodSeconds: 5, FailureThreshold: 3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(probePort), Scheme: probeScheme}},
			InitialDelaySeconds: 30, PeriodSeconds: 15, FailureThreshold: 4,
		},
		Resources:    pod.Resources,
		VolumeMounts: mounts,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &f,
			ReadOnlyRootFilesystem:   ptr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func podTemplate(j *sluicev1.SluiceJob, d deployment, role string) corev1.PodTemplateSpec {
	s := d.spec
	pod := s.Coordinator
	if role == ComponentWorker {
		pod = s.Worker
	}
	ann := maps.Clone(pod.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationSpecHash] = versionHash(s)
	volumes := []corev1.Volume{
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if n := s.Security.TLSSecretName; n != "" {
		volumes = append(volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: n, DefaultMode: ptr(int32(0o440))}}})
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels(j, role), Annotations: ann},
		Spec: corev1.PodSpec{
			ServiceAccountName:           pod.ServiceAccountName,
			AutomountServiceAccountToken: ptr(false),
			NodeSelector:                 pod.NodeSelector,
			// SIGTERM suspends the job; its checkpoints stay.
			TerminationGracePeriodSeconds: ptr(int64(60)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(10001)), RunAsGroup: ptr(int64(10001)), FSGroup: ptr(int64(10001)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{container(j, d, role)},
			Volumes:    volumes,
		},
	}
}

// coordinatorReplicas: one, and the standbys under HA.
func coordinatorReplicas(s *sluicev1.SluiceJobSpec) int32 {
	if s.HA != nil {
		return 1 + s.HA.Standbys
	}
	return 1
}

func coordinatorDeployment(j *sluicev1.SluiceJob, d deployment) *appsv1.Deployment {
	replicas := int32(0)
	if d.running {
		replicas = coordinatorReplicas(d.spec)
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: coordinatorName(j), Namespace: j.Namespace, Labels: labels(j, ComponentCoordinator)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			// The old coordinator is gone before a new one starts.
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit: ptr(int32(3)),
			Selector:             &metav1.LabelSelector{MatchLabels: selector(j, ComponentCoordinator)},
			Template:             podTemplate(j, d, ComponentCoordinator),
		},
	}
}

func workerStatefulSet(j *sluicev1.SluiceJob, d deployment) *appsv1.StatefulSet {
	replicas := int32(0)
	if d.running {
		replicas = workers(d.spec)
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: workerName(j), Namespace: j.Namespace, Labels: labels(j, ComponentWorker)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             &replicas,
			ServiceName:          workersService(j),
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			RevisionHistoryLimit: ptr(int32(3)),
			Selector:             &metav1.LabelSelector{MatchLabels: selector(j, ComponentWorker)},
			Template:             podTemplate(j, d, ComponentWorker),
		},
	}
}

func coordinatorSvc(j *sluicev1.SluiceJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: coordinatorName(j), Namespace: j.Namespace, Labels: labels(j, ComponentCoordinator)},
		Spec: corev1.ServiceSpec{
			Selector: selector(j, ComponentCoordinator),
			// The workers reach the control plane through this Service
			// before the job runs, when /readyz still says 503 (it is
			// ready once the workers' tasks run): not-ready addresses are
			// published, or the job could never start. Under HA the
			// workers find the leader in etcd instead.
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				{Name: "rpc", Port: PortRPC, TargetPort: intstr.FromString("rpc")},
				{Name: "rest", Port: PortREST, TargetPort: intstr.FromString("rest")},
			},
		},
	}
}

func workersSvc(j *sluicev1.SluiceJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: workersService(j), Namespace: j.Namespace, Labels: labels(j, ComponentWorker)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 selector(j, ComponentWorker),
			Ports: []corev1.ServicePort{
				{Name: "data", Port: PortData, TargetPort: intstr.FromString("data")},
				{Name: "metrics", Port: PortMetrics, TargetPort: intstr.FromString("metrics")},
			},
		},
	}
}

// workerPDB lets a voluntary disruption (a node drain) take one worker
// at a time: the job restarts from its latest checkpoint once per
// worker, rather than losing every worker at once.
func workerPDB(j *sluicev1.SluiceJob) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: workerName(j), Namespace: j.Namespace, Labels: labels(j, ComponentWorker)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: selector(j, ComponentWorker)},
		},
	}
}

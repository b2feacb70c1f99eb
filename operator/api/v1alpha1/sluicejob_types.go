package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpgradeMode is how a change of the job's code or configuration reaches
// the running job (Flink's operator's upgradeMode).
// +kubebuilder:validation:Enum=stateless;savepoint;last-state
type UpgradeMode string

const (
	// UpgradeStateless stops the old version and starts the new one from
	// no state, in a checkpoint directory of its own: its sources start
	// where they are told to, and output the old version committed may
	// be written again.
	UpgradeStateless UpgradeMode = "stateless"
	// UpgradeSavepoint stops the job with a savepoint and starts the new
	// version from it (the default): nothing is lost or written twice.
	UpgradeSavepoint UpgradeMode = "savepoint"
	// UpgradeLastState stops the old version's processes (the job is
	// suspended, its checkpoints kept) and starts the new version from
	// the latest checkpoint, even when the job is failing and cannot take
	// a savepoint.
	UpgradeLastState UpgradeMode = "last-state"
)

// SluiceJobSpec is the job the operator keeps deployed.
type SluiceJobSpec struct {
	// Image is the job's container image: a program built on package
	// runner and cluster.Flags (the repository's Dockerfile), the same
	// image for the coordinator and the workers.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// ImagePullPolicy of both containers.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// Args are the program's own arguments, given to every process; the
	// operator appends the role's (--listen, --data-listen). $(VAR)
	// references to the container's variables are expanded, e.g.
	// $(SLUICE_POD_IP).
	// +optional
	Args []string `json:"args,omitempty"`
	// Env are more variables for every process (the program's own, e.g.
	// KAFKA_BROKERS), after the operator's.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Parallelism is the job's default parallelism (parallelism.default).
	// A change is a rescale: the job's rescale call when its coordinator
	// has one, else a stop with a savepoint and a start from it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	Parallelism int32 `json:"parallelism,omitempty"`
	// Slots each worker offers (taskmanager.numberOfTaskSlots).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	Slots int32 `json:"slots,omitempty"`
	// Workers is the number of worker processes; unset: as many as the
	// parallelism needs (ceil(parallelism / slots)).
	// +kubebuilder:validation:Minimum=1
	// +optional
	Workers *int32 `json:"workers,omitempty"`

	// CheckpointDir is where checkpoints go, a location every process
	// reaches (execution.checkpointing.dir, s3://bucket/prefix).
	// +kubebuilder:validation:MinLength=1
	CheckpointDir string `json:"checkpointDir"`
	// SavepointDir is where savepoints go
	// (execution.checkpointing.savepoint-dir); unset: <checkpointDir>/savepoints.
	// +optional
	SavepointDir string `json:"savepointDir,omitempty"`
	// InitialSavepointPath is the snapshot the job's first deployment
	// starts from (execution.state-recovery.path).
	// +optional
	InitialSavepointPath string `json:"initialSavepointPath,omitempty"`
	// Configuration holds options by their Flink key, given to every
	// process (SLUICE_PROPERTIES).
	// +optional
	Configuration map[string]string `json:"configuration,omitempty"`

	// Upgrade says how changes reach the running job.
	// +optional
	Upgrade UpgradeSpec `json:"upgrade,omitempty"`
	// Savepoints on a schedule and on demand.
	// +optional
	Savepoints SavepointSpec `json:"savepoints,omitempty"`
	// Security is the material the processes authenticate with, from
	// Secrets.
	// +optional
	Security SecuritySpec `json:"security,omitempty"`
	// HA turns on the coordinator's high availability on etcd: a standby
	// coordinator takes the job over from its latest checkpoint.
	// +optional
	HA *HASpec `json:"ha,omitempty"`

	// Coordinator's pod settings.
	// +optional
	Coordinator PodSpec `json:"coordinator,omitempty"`
	// Worker's pod settings.
	// +optional
	Worker PodSpec `json:"worker,omitempty"`
}

// UpgradeSpec says how a change of the job is carried out.
type UpgradeSpec struct {
	// Mode: stateless, savepoint (default) or last-state.
	// +kubebuilder:default=savepoint
	// +optional
	Mode UpgradeMode `json:"mode,omitempty"`
	// Timeout bounds each step of an upgrade (the savepoint, the old
	// processes' exit, the new version reaching RUNNING); past it the
	// upgrade fails and is rolled back. Default 5m.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// SavepointSpec asks for savepoints.
type SavepointSpec struct {
	// Interval between periodic savepoints; unset or 0: none
	// (Flink's kubernetes.operator.periodic.savepoint.interval).
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// TriggerNonce: a change of its value takes a savepoint now
	// (Flink's savepointTriggerNonce).
	// +optional
	TriggerNonce int64 `json:"triggerNonce,omitempty"`
	// MaxCount is how many periodic and on-demand savepoints are kept;
	// older ones are disposed of. The one the job restored from is kept
	// besides them, and upgrades' savepoints are never disposed of. 0:
	// keep all. Default 10 (Flink's kubernetes.operator.savepoint.history.max.count).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxCount int32 `json:"maxCount,omitempty"`
}

// SecuritySpec refers to the Secrets the processes and the operator read.
type SecuritySpec struct {
	// TLSSecretName is a kubernetes.io/tls Secret (tls.crt, tls.key and
	// ca.crt) mounted in every process: mutual TLS on the control and
	// data planes (security.ssl.internal.*).
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`
	// InternalSecret is a key of a Secret holding the shared secret every
	// process proves it holds (security.internal.secret), alone or with
	// TLS.
	// +optional
	InternalSecret *corev1.SecretKeySelector `json:"internalSecret,omitempty"`
	// RESTToken is a key of a Secret holding the REST API's bearer token
	// (rest.authentication.token); the operator calls the API with it.
	// +optional
	RESTToken *corev1.SecretKeySelector `json:"restToken,omitempty"`
	// Insecure lets the processes listen beyond loopback with neither
	// TLS nor a secret (security.internal.insecure).
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// HASpec is the coordinator's high availability on etcd.
type HASpec struct {
	// EtcdEndpoints (high-availability.etcd.endpoints).
	// +kubebuilder:validation:MinItems=1
	EtcdEndpoints []string `json:"etcdEndpoints"`
	// CredentialsSecretName holds SLUICE_HA_ETCD_USERNAME and
	// SLUICE_HA_ETCD_PASSWORD, when etcd wants them.
	// +optional
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`
	// Standbys is the number of standby coordinators. Default 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Standbys int32 `json:"standbys,omitempty"`
}

// PodSpec are one role's pod settings.
type PodSpec struct {
	// Resources of the container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ServiceAccountName of the pods; unset: the namespace's default.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// NodeSelector of the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Annotations added to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// JobPhase is where the operator is with the job.
type JobPhase string

const (
	// PhaseDeploying: the objects are applied, the job is not RUNNING yet.
	PhaseDeploying JobPhase = "Deploying"
	// PhaseRunning: the job runs the spec in status.deployed.
	PhaseRunning JobPhase = "Running"
	// PhaseUpgrading: an upgrade or a rescale is under way (status.upgrade).
	PhaseUpgrading JobPhase = "Upgrading"
	// PhaseRollingBack: a failed upgrade is being undone.
	PhaseRollingBack JobPhase = "RollingBack"
	// PhaseFailed: the job failed and nothing the operator can do helps
	// (a rollback failed too); a change of the spec tries again.
	PhaseFailed JobPhase = "Failed"
)

// UpgradeStep is one step of an upgrade, recorded before it is taken so
// that an operator restarted mid-upgrade goes on from it.
type UpgradeStep string

const (
	// StepRescaling: the job's rescale call was made; waiting for the job
	// to run at the new parallelism.
	StepRescaling UpgradeStep = "Rescaling"
	// StepSavepointing: stop with a savepoint triggered (upgrade.triggerId).
	StepSavepointing UpgradeStep = "Savepointing"
	// StepDraining: the old version's processes are stopping; the new one
	// starts only once none is left.
	StepDraining UpgradeStep = "Draining"
	// StepDeploying: the new spec's processes start; waiting for RUNNING.
	StepDeploying UpgradeStep = "Deploying"
)

// UpgradeStatus is the upgrade (or rescale) under way, or the last one.
type UpgradeStatus struct {
	// Mode the upgrade runs in.
	Mode UpgradeMode `json:"mode,omitempty"`
	// Step it is at; empty once it ended.
	// +optional
	Step UpgradeStep `json:"step,omitempty"`
	// Target is the spec being deployed (its hash in TargetHash).
	// +optional
	Target *SluiceJobSpec `json:"target,omitempty"`
	// TargetHash identifies Target.
	// +optional
	TargetHash string `json:"targetHash,omitempty"`
	// RollingBack is true while the upgrade is undone: Target is then the
	// last good spec.
	// +optional
	RollingBack bool `json:"rollingBack,omitempty"`
	// TriggerID of the stop-with-savepoint.
	// +optional
	TriggerID string `json:"triggerId,omitempty"`
	// RestorePath the new processes start from.
	// +optional
	RestorePath string `json:"restorePath,omitempty"`
	// StepStarted is when the step began (its timeout counts from it).
	// +optional
	StepStarted *metav1.Time `json:"stepStarted,omitempty"`
	// Started and Finished bound the upgrade.
	// +optional
	Started *metav1.Time `json:"started,omitempty"`
	// +optional
	Finished *metav1.Time `json:"finished,omitempty"`
	// Outcome: Succeeded, RolledBack or Failed, once it ended.
	// +optional
	Outcome string `json:"outcome,omitempty"`
	// Message says why it failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// SavepointInfo is one savepoint the operator took.
type SavepointInfo struct {
	// Location of the savepoint (its directory).
	Location string `json:"location"`
	// Time it completed.
	Time metav1.Time `json:"time"`
	// Trigger: periodic, manual or upgrade.
	Trigger string `json:"trigger"`
}

// SavepointStatus reports the savepoints.
type SavepointStatus struct {
	// Pending is a savepoint triggered and not yet done.
	// +optional
	PendingTriggerID string `json:"pendingTriggerId,omitempty"`
	// PendingTrigger is the pending savepoint's trigger (periodic, manual).
	// +optional
	PendingTrigger string `json:"pendingTrigger,omitempty"`
	// LastTriggerNonce is the spec's trigger nonce last acted on.
	// +optional
	LastTriggerNonce int64 `json:"lastTriggerNonce,omitempty"`
	// LastPeriodic is when the last periodic savepoint was triggered.
	// +optional
	LastPeriodic *metav1.Time `json:"lastPeriodic,omitempty"`
	// History of the savepoints kept, oldest first.
	// +optional
	History []SavepointInfo `json:"history,omitempty"`
}

// JobInfo is what the job's REST API last said.
type JobInfo struct {
	// ID of the job.
	// +optional
	ID string `json:"id,omitempty"`
	// State: CREATED, RUNNING, RESTARTING, FAILED, FINISHED, ...
	// +optional
	State string `json:"state,omitempty"`
	// Parallelism of the job's vertices, highest.
	// +optional
	Parallelism int32 `json:"parallelism,omitempty"`
	// LatestCheckpoint is the latest completed checkpoint's location.
	// +optional
	LatestCheckpoint string `json:"latestCheckpoint,omitempty"`
	// LatestCheckpointID is its id.
	// +optional
	LatestCheckpointID int64 `json:"latestCheckpointId,omitempty"`
	// Coordinator is the coordinator pod whose REST API the operator
	// last found leading the job, under HA (spec.ha).
	// +optional
	Coordinator string `json:"coordinator,omitempty"`
}

// AutoscalerStatus is what the job's own autoscaler (configuration
// job.autoscaler.enabled: it runs inside the job and rescales it in
// place) reports on GET /jobs/:id/autoscaler. Its rescales change the
// job's parallelism (status.job.parallelism), not spec.parallelism: the
// operator does not undo them; an upgrade starts at spec.parallelism.
type AutoscalerStatus struct {
	// Enabled: an autoscaler runs with the job.
	Enabled bool `json:"enabled"`
	// Rescales is how many rescales it asked of the job.
	// +optional
	Rescales int64 `json:"rescales,omitempty"`
	// LastEvaluation is when it last looked at the job, and
	// LastOutcome what it came to (collecting, stabilizing, steady,
	// within-target, recommend, scale, ...).
	// +optional
	LastEvaluation *metav1.Time `json:"lastEvaluation,omitempty"`
	// +optional
	LastOutcome string `json:"lastOutcome,omitempty"`
	// LastDecision is its latest evaluation that rescaled the job
	// (outcome scale) or recommended it (recommend: the autoscaler only
	// advises, job.autoscaler.scaling.enabled false).
	// +optional
	LastDecision *AutoscalerDecision `json:"lastDecision,omitempty"`
}

// AutoscalerDecision is one rescale the autoscaler decided on.
type AutoscalerDecision struct {
	// Time of the evaluation.
	Time metav1.Time `json:"time"`
	// Outcome: scale or recommend.
	Outcome string `json:"outcome"`
	// Vertices whose parallelism it changes.
	// +optional
	Vertices []VertexDecision `json:"vertices,omitempty"`
}

// VertexDecision is one vertex's new parallelism and why.
type VertexDecision struct {
	// Name of the vertex.
	Name string `json:"name"`
	// Parallelism before, and NewParallelism after.
	Parallelism    int32 `json:"parallelism"`
	NewParallelism int32 `json:"newParallelism"`
	// Reason of the change, or what limited it.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// SluiceJobStatus is what the operator observed and did.
type SluiceJobStatus struct {
	// ObservedGeneration is the spec generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is where the operator is with the job.
	// +optional
	Phase JobPhase `json:"phase,omitempty"`
	// Job is the job's state from its REST API.
	// +optional
	Job JobInfo `json:"job,omitempty"`
	// Deployed is the spec the running processes were made from.
	// +optional
	Deployed *SluiceJobSpec `json:"deployed,omitempty"`
	// DeployedHash identifies Deployed.
	// +optional
	DeployedHash string `json:"deployedHash,omitempty"`
	// LastStable is the last spec that reached RUNNING, the one a failed
	// upgrade rolls back to.
	// +optional
	LastStable *SluiceJobSpec `json:"lastStable,omitempty"`
	// RestorePath is the snapshot the current processes started from.
	// +optional
	RestorePath string `json:"restorePath,omitempty"`
	// Epoch numbers the job's checkpoint directory: a stateless upgrade
	// starts a new one (<checkpointDir>/epoch-N).
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// Upgrade is the upgrade under way, or the last one.
	// +optional
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`
	// Savepoints taken and pending.
	// +optional
	Savepoints SavepointStatus `json:"savepoints,omitempty"`
	// Autoscaler is what the job's autoscaler decided; unset until the
	// job's API was read once.
	// +optional
	Autoscaler *AutoscalerStatus `json:"autoscaler,omitempty"`
	// Conditions: Ready (the job RUNNING at the spec), Progressing (an
	// upgrade under way), UpgradeFailed (the last upgrade was rolled back).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SluiceJob is a Sluice job the operator deploys, upgrades, rescales and
// reports.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sj
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.job.state`
// +kubebuilder:printcolumn:name="Parallelism",type=integer,JSONPath=`.spec.parallelism`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SluiceJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SluiceJobSpec   `json:"spec,omitempty"`
	Status SluiceJobStatus `json:"status,omitempty"`
}

// SluiceJobList is a list of SluiceJobs.
//
// +kubebuilder:object:root=true
type SluiceJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SluiceJob `json:"items"`
}

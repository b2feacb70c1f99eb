package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SavepointState is where a SluiceSavepoint is (FLIP-446's snapshot
// states).
// +kubebuilder:validation:Enum=Pending;InProgress;Completed;Failed
type SavepointState string

const (
	// SavepointPending: not triggered yet; it is once the job runs its
	// deployed spec (not while it deploys, upgrades or rescales).
	SavepointPending SavepointState = "Pending"
	// SavepointInProgress: triggered (status.triggerId), not done.
	SavepointInProgress SavepointState = "InProgress"
	// SavepointCompleted: written at status.path.
	SavepointCompleted SavepointState = "Completed"
	// SavepointFailed: the job could not take it (status.error); a
	// SluiceSavepoint is not triggered again: create a new one.
	SavepointFailed SavepointState = "Failed"
)

// SluiceSavepointSpec asks for one savepoint of a SluiceJob.
type SluiceSavepointSpec struct {
	// JobName is the SluiceJob, in the same namespace, to take the
	// savepoint of.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="jobName cannot be changed"
	JobName string `json:"jobName"`
	// Directory the savepoint goes into; unset: the job's
	// (spec.savepointDir, else <checkpointDir>/savepoints).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="directory cannot be changed"
	// +optional
	Directory string `json:"directory,omitempty"`
	// DisposeOnDelete deletes the savepoint's files (POST
	// /savepoint-disposal on the job) when this resource is deleted
	// (FLIP-446's disposeOnDelete). Default true: the resource is the
	// savepoint's retention; set it false to keep the files.
	// +kubebuilder:default=true
	// +optional
	DisposeOnDelete *bool `json:"disposeOnDelete,omitempty"`
}

// SluiceSavepointStatus is what became of the savepoint.
type SluiceSavepointStatus struct {
	// State: Pending, InProgress, Completed or Failed.
	// +optional
	State SavepointState `json:"state,omitempty"`
	// JobID is the job the savepoint was triggered on.
	// +optional
	JobID string `json:"jobId,omitempty"`
	// TriggerID of the savepoint on the job's REST API.
	// +optional
	TriggerID string `json:"triggerId,omitempty"`
	// TriggerTime is when it was triggered.
	// +optional
	TriggerTime *metav1.Time `json:"triggerTime,omitempty"`
	// ResultTime is when it completed or failed.
	// +optional
	ResultTime *metav1.Time `json:"resultTime,omitempty"`
	// Path of the completed savepoint: what spec.initialSavepointPath
	// of a SluiceJob, or `sluice run -s`, restores from.
	// +optional
	Path string `json:"path,omitempty"`
	// Error says why it failed, or why it is still pending.
	// +optional
	Error string `json:"error,omitempty"`
	// Disposed is set once the savepoint's files were disposed of.
	// +optional
	Disposed bool `json:"disposed,omitempty"`
}

// SluiceSavepoint is one savepoint of a SluiceJob taken on demand (Flink's
// FlinkStateSnapshot, FLIP-446): the operator triggers it once the job
// runs, reports its path or error, and disposes of its files when the
// resource is deleted (spec.disposeOnDelete). It is not owned by the job:
// it outlives it, and is not counted in the job's
// spec.savepoints.maxCount.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ssp
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.spec.jobName`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.status.path`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SluiceSavepoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SluiceSavepointSpec   `json:"spec,omitempty"`
	Status SluiceSavepointStatus `json:"status,omitempty"`
}

// SluiceSavepointList is a list of SluiceSavepoints.
//
// +kubebuilder:object:root=true
type SluiceSavepointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SluiceSavepoint `json:"items"`
}

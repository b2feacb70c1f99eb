// Package v1alpha1 holds the custom resources of the Sluice operator:
// SluiceJob, a Sluice job on Kubernetes (a coordinator Deployment and a
// StatefulSet of workers) that the operator deploys, upgrades, rescales
// and reports, and SluiceSavepoint, a savepoint of one taken on demand.
// The CRDs and the operator's RBAC in deploy/operator/ are generated from
// these types (make operator-generate).
//
// +kubebuilder:object:generate=true
// +groupName=sluice.sluicehq.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of SluiceJob and SluiceSavepoint.
var GroupVersion = schema.GroupVersion{Group: "sluice.sluicehq.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the types of this group with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &SluiceJob{}, &SluiceJobList{}, &SluiceSavepoint{}, &SluiceSavepointList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Package v1alpha1 holds the SluiceJob custom resource: a Sluice job on
// Kubernetes (a coordinator Deployment and a StatefulSet of workers) that
// the operator deploys, upgrades, rescales and reports. The CRD and the
// operator's RBAC in deploy/operator/ are generated from these types
// (make -C operator generate).
//
// +kubebuilder:object:generate=true
// +groupName=sluice.sluicehq.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the API group and version of SluiceJob.
var GroupVersion = schema.GroupVersion{Group: "sluice.sluicehq.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the types of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package dra

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	kubeversion "k8s.io/component-base/version"

	// Imported for its init order only: Go initializes a package after
	// every package it imports, so upstream's gates are registered before
	// ours. Without it, github.com/dra-failfast/... sorts before
	// k8s.io/kubernetes/... and would register first; a future upstream
	// kubelet that defines DRAHandlePermanentDriverFailures with another spec
	// would then panic at start ("feature gate ... with different spec
	// already exists"). In this order upstream's definition simply wins.
	_ "k8s.io/kubernetes/pkg/features"
)

// DRAHandlePermanentDriverFailures lets a DRA driver fail a pod by marking a
// NodePrepareResources error permanent (KEP-5322).
const DRAHandlePermanentDriverFailures featuregate.Feature = "DRAHandlePermanentDriverFailures"

var featureSpecs = map[featuregate.Feature]featuregate.VersionedSpecs{
	DRAHandlePermanentDriverFailures: {
		// Alpha from the kubelet it is built into on: a spec of a later
		// version would be PreAlpha at an older kubelet's emulated version,
		// and the gate could not be turned on there.
		{Version: version.MustParse(kubeversion.DefaultKubeBinaryVersion), Default: false, PreRelease: featuregate.Alpha},
	},
}

// upstreamGates are gates that k8s.io/kubernetes/pkg/features registers, one
// at least in every release the fork builds on (1.38 removed
// DynamicResourceAllocation, GA since 1.34). They are named by their strings,
// not through that package, so that nothing but the blank import above orders
// the inits: without the import, TestUpstreamGatesRegisteredFirst fails.
var upstreamGates = []featuregate.Feature{"DynamicResourceAllocation", "DRAAdminAccess"}

// upstreamGatesFirst records that upstream's gates were registered when ours
// was.
var upstreamGatesFirst bool

func init() {
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	for _, gate := range upstreamGates {
		_, registered := known[gate]
		upstreamGatesFirst = upstreamGatesFirst || registered
	}
	if err := addFeatureGate(utilfeature.DefaultMutableFeatureGate); err != nil {
		panic(err)
	}
}

// addFeatureGate registers the gate unless the gate set knows it already (a
// future upstream kubelet defines it itself: theirs wins).
func addFeatureGate(gate featuregate.MutableVersionedFeatureGate) error {
	if _, known := gate.GetAll()[DRAHandlePermanentDriverFailures]; known {
		return nil
	}
	if err := gate.AddVersioned(featureSpecs); err != nil {
		return fmt.Errorf("register feature gate %s: %w", DRAHandlePermanentDriverFailures, err)
	}
	return nil
}

// Enabled reports whether the kubelet honours permanent driver failures.
func Enabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(DRAHandlePermanentDriverFailures)
}

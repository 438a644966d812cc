package dra

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

// DRAHandlePermanentDriverFailures lets a DRA driver fail a pod by marking a
// NodePrepareResources error permanent (KEP-5322).
const DRAHandlePermanentDriverFailures featuregate.Feature = "DRAHandlePermanentDriverFailures"

var featureSpecs = map[featuregate.Feature]featuregate.VersionedSpecs{
	DRAHandlePermanentDriverFailures: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
}

func init() {
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

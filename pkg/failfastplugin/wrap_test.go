// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// healthPlugin serves device health itself, as kubeletplugin before v0.37
// asks of a driver.
type healthPlugin struct {
	scriptedPlugin
	drahealthv1alpha1.UnimplementedDRAResourceHealthServer
}

var errWatched = errors.New("the plugin's own NodeWatchResources")

func (healthPlugin) NodeWatchResources(*drahealthv1alpha1.NodeWatchResourcesRequest, grpc.ServerStreamingServer[drahealthv1alpha1.NodeWatchResourcesResponse]) error {
	return errWatched
}

// TestWrapKeepsHealthServer: a wrapped plugin serves device health when the
// plugin does (kubeletplugin v0.36 looks for the v1alpha1 health server on
// the plugin it is given), through the plugin's own method, and only then.
func TestWrapKeepsHealthServer(t *testing.T) {
	faults, err := failfastplugin.NewDeviceFaults(failfastplugin.DeviceFaultConfig{DriverName: driverName, NodeName: faultNode, KubeClient: newFaultAPI(t)})
	if err != nil {
		t.Fatal(err)
	}
	for name, wrap := range map[string]func(kubeletplugin.DRAPlugin) kubeletplugin.DRAPlugin{
		"Wrap":              failfastplugin.Wrap,
		"DeviceFaults.Wrap": faults.Wrap,
	} {
		t.Run(name, func(t *testing.T) {
			health, ok := wrap(healthPlugin{}).(drahealthv1alpha1.DRAResourceHealthServer)
			if !ok {
				t.Fatal("the wrapper of a plugin with a health server hides it")
			}
			if err := health.NodeWatchResources(&drahealthv1alpha1.NodeWatchResourcesRequest{}, nil); !errors.Is(err, errWatched) {
				t.Errorf("NodeWatchResources: %v, want the plugin's own", err)
			}
			if _, ok := wrap(scriptedPlugin{}).(drahealthv1alpha1.DRAResourceHealthServer); ok {
				t.Error("the wrapper of a plugin without a health server has one")
			}
			wrapped := wrap(healthPlugin{})
			if err := prepareErr(t, wrapped, "permanent"); !failfastplugin.IsPermanent(err) {
				t.Errorf("prepare through the health plugin's wrapper: %v, want a permanent error", err)
			}
		})
	}
}

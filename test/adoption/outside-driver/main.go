// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Command outside-driver is the smallest DRA driver that adopts the driver
// library the way a driver outside this repository does: hack/verify-adoption.sh
// copies this directory into an empty module, which fetches the library by
// its release tag with `go get` and no replace, then tidies, builds, vets and
// tests it. In this repository it builds in the root module, so that it
// cannot rot between releases.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin"
)

// errUnsupported is the driver's answer to a claim that no retry can help.
var errUnsupported = errors.New("claim asks for a device this driver never has")

// plugin prepares every claim but those whose name says it cannot be
// prepared, which fail permanently.
type plugin struct{}

func (plugin) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		if claim.Name == "unsupported" {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: failfastplugin.Permanent(fmt.Errorf("claim %s: %w", claim.Name, errUnsupported))}
			continue
		}
		result[claim.UID] = kubeletplugin.PrepareResult{}
	}
	return result, nil
}

func (plugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		result[claim.UID] = nil
	}
	return result, nil
}

func (plugin) HandleError(context.Context, error, string) {}

func main() {
	driverName := flag.String("driver-name", "outside.example.com", "the DRA driver name")
	nodeName := flag.String("node-name", os.Getenv("NODE_NAME"), "the node this driver runs on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The one line that differs from a driver on kubeletplugin alone.
	helper, err := failfastplugin.Start(ctx, plugin{}, kubeletplugin.DriverName(*driverName), kubeletplugin.NodeName(*nodeName))
	if err != nil {
		fmt.Fprintln(os.Stderr, "outside-driver:", err)
		os.Exit(1)
	}
	defer helper.Stop()
	<-ctx.Done()
}

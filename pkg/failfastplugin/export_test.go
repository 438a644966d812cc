// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package failfastplugin

import (
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// RuleName is the name of the DeviceTaintRule of device, for the tests.
func (f *DeviceFaults) RuleName(device DeviceID) string { return f.ruleName(device) }

// SetAfterList makes Load call hook between listing the rules and taking
// them in.
func (f *DeviceFaults) SetAfterList(hook func()) { f.afterList = hook }

// restClients are the REST clients that stand for the DeviceTaintRules API
// of a fake clientset, whose own REST clients are nil.
var restClients sync.Map

func init() {
	clientsetRESTClient := restClientOf
	restClientOf = func(kube kubernetes.Interface) rest.Interface {
		if client, ok := restClients.Load(kube); ok {
			return client.(rest.Interface)
		}
		return clientsetRESTClient(kube)
	}
}

// ServeRulesOver makes the library read and write the DeviceTaintRules of
// kube through client.
func ServeRulesOver(kube kubernetes.Interface, client rest.Interface) {
	restClients.Store(kube, client)
}

// RulesAPIVersion is the version of resource.k8s.io in which f found
// DeviceTaintRules, "" before it looked.
func (f *DeviceFaults) RulesAPIVersion() string {
	f.api.mu.Lock()
	defer f.api.mu.Unlock()
	if f.api.found == nil {
		return ""
	}
	return f.api.found.version
}

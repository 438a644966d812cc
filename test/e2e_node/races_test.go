// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e_node

package e2enode

import "testing"

// The upstream race seen in kubelet-race runs (volume manager metrics vs
// volume reconstruction at start) is not ours; one through the status
// manager is.
func TestDataRaces(t *testing.T) {
	upstream := "WARNING: DATA RACE\nWrite at 0x00c00050bcc0 by goroutine 386:\n  k8s.io/component-base/metrics.(*Counter).setPrometheusCounter()\n" +
		"      k8s.io/component-base/metrics/counter.go:81 +0x239\n  k8s.io/kubernetes/pkg/kubelet/volumemanager.(*volumeManager).Run.Register.func1()\n" +
		"  k8s.io/kubernetes/pkg/kubelet.(*Kubelet).Run.gowrap1()\n==================\n"
	ours := "WARNING: DATA RACE\nRead at 0x1 by goroutine 7:\n  k8s.io/kubernetes/pkg/kubelet/status.mergePodStatus()\n==================\n"
	for name, tc := range map[string]struct {
		log                  string
		wantOurs, wantOthers int
	}{
		"none":            {log: "I1123 all quiet\n"},
		"upstream only":   {log: upstream + upstream, wantOthers: 2},
		"ours and theirs": {log: upstream + ours, wantOurs: 1, wantOthers: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if o, u := dataRaces(tc.log); o != tc.wantOurs || u != tc.wantOthers {
				t.Errorf("dataRaces = %d, %d; want %d, %d", o, u, tc.wantOurs, tc.wantOthers)
			}
		})
	}
}

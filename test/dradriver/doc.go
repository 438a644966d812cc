// Package dradriver is the test DRA driver of the demo, the e2e tests and the
// benchmarks: a kubelet plugin built on k8s.io/dynamic-resource-allocation's
// kubeletplugin helper and on pkg/failfastplugin, whose failures are chosen by
// the test.
//
// The driver publishes one ResourceSlice for its node with the devices dev-0
// ... dev-<N-1> and prepares claims by writing one CDI spec file per claim
// that gives the containers the environment variables
// DRA_DEVICE_<REQUEST>=<device name(s)> and DRA_CLAIM=<namespace>/<name>.
//
// Failures are injected in two ways:
//
//   - Per claim, through an opaque device configuration for the driver (in the
//     claim or in its DeviceClass), a PrepareBehavior object:
//
//     {"apiVersion": "dra-failfast.test/v1", "kind": "PrepareBehavior",
//     "prepare": "Succeed" | "Permanent" | "Transient",
//     "failures": N, "message": "..."}
//
//     Permanent fails every prepare call of the claim with an error marked by
//     failfastplugin.Permanent. Transient fails the first N prepare calls of
//     the claim with a plain (retriable) error and then succeeds; N = 0 fails
//     forever. A configuration that cannot be parsed fails the claim
//     permanently, with an error that names the claim, the requests the
//     configuration applies to and the problem.
//
//   - Per device: preparing a claim that got a device of the broken set fails
//     permanently ("device dev-1 is broken"). With taint mode on, the driver
//     first republishes its ResourceSlice with the NoSchedule taint
//     dra-failfast.test/broken on that device, so that the scheduler gives
//     replacement pods another device. The broken set can be changed at
//     runtime through the HTTP control endpoint (see Handler and Client).
//
// Run starts the whole driver (kubelet plugin, ResourceSlice, HTTP endpoint);
// cmd/dra-test-driver is the command around it.
package dradriver

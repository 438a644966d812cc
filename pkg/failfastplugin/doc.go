// Package failfastplugin lets a DRA driver built on
// k8s.io/dynamic-resource-allocation/kubeletplugin report that preparing a
// ResourceClaim failed permanently (KEP-5322). A kubelet with the
// DRAHandlePermanentDriverFailures feature then fails the Pod instead of
// retrying forever; older kubelets ignore the mark and retry as before.
//
// Mark the error with Permanent, and start the driver with Start instead of
// kubeletplugin.Start (or wrap the plugin with Wrap and add GRPCInterceptor
// to the options yourself):
//
//	func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
//		result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
//		for _, claim := range claims {
//			config, err := parseConfig(claim)
//			if err != nil {
//				// The claim is immutable: retrying can never help.
//				result[claim.UID] = kubeletplugin.PrepareResult{Err: failfastplugin.Permanent(fmt.Errorf("invalid opaque config: %w", err))}
//				continue
//			}
//			result[claim.UID] = d.prepare(ctx, claim, config) // transient errors stay unmarked
//		}
//		return result, nil
//	}
//
//	helper, err := failfastplugin.Start(ctx, &driver{},
//		kubeletplugin.DriverName("gpu.example.com"),
//		kubeletplugin.NodeName(nodeName),
//		kubeletplugin.KubeClient(client),
//	)
//
// The mark survives wrapping with %w (fmt.Errorf("...: %w", err),
// errors.Join) but not formatting with %v or %s: fmt.Errorf("%v", err) turns
// a permanent error into a plain one, which the kubelet retries.
//
// Only the v1 DRA gRPC service carries the mark. A kubelet that talks to the
// driver over v1beta1 always sees a transient error.
package failfastplugin

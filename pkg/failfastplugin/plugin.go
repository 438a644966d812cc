package failfastplugin

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Start is kubeletplugin.Start with the plugin wrapped by Wrap and the
// GRPCInterceptor option added, so that errors marked with Permanent reach the
// kubelet as permanent.
func Start(ctx context.Context, plugin kubeletplugin.DRAPlugin, opts ...kubeletplugin.Option) (*kubeletplugin.Helper, error) {
	opts = append(opts[:len(opts):len(opts)], GRPCInterceptor())
	return kubeletplugin.Start(ctx, Wrap(plugin), opts...)
}

// Wrap returns a DRAPlugin that notes which claims plugin failed permanently
// in a NodePrepareResources call, for GRPCInterceptor to put on the wire. All
// other calls go to plugin unchanged.
func Wrap(plugin kubeletplugin.DRAPlugin) kubeletplugin.DRAPlugin {
	return &wrappedPlugin{DRAPlugin: plugin}
}

type wrappedPlugin struct {
	kubeletplugin.DRAPlugin
	warnOnce sync.Once
}

func (p *wrappedPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result, err := p.DRAPlugin.PrepareResourceClaims(ctx, claims)
	rec := recorderFrom(ctx)
	for uid, claimResult := range result {
		if !IsPermanent(claimResult.Err) {
			continue
		}
		if rec == nil {
			p.warnOnce.Do(func() {
				klog.FromContext(ctx).Info("Warning: a claim failed permanently but the failfastplugin gRPC interceptor is not installed; the kubelet will see a transient error", "claimUID", uid)
			})
			break
		}
		rec.markPermanent(uid)
	}
	return result, err
}

// recorder carries, through the context of one NodePrepareResources call, the
// claims that the wrapped plugin failed permanently.
type recorder struct {
	mu        sync.Mutex
	permanent map[types.UID]bool
}

type recorderKey struct{}

func withRecorder(ctx context.Context, rec *recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, rec)
}

func recorderFrom(ctx context.Context) *recorder {
	rec, _ := ctx.Value(recorderKey{}).(*recorder)
	return rec
}

func (r *recorder) markPermanent(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.permanent == nil {
		r.permanent = make(map[types.UID]bool)
	}
	r.permanent[uid] = true
}

func (r *recorder) isPermanent(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.permanent[uid]
}

// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
	"github.com/dra-failfast/dra-failfast/pkg/failfastplugin/admission"
)

const (
	// forgedClients send forged reviews at once, each the next as soon as the webhook answered: three
	// per webhook pod, one more than its slots for large requests (DefaultMaxConcurrentLarge), so
	// one of them waits for a slot (refused with 429 only after its timeout). More only starves the 2-core machine the cluster shares.
	forgedClients = 6
	// forgedLoad is how long they do.
	forgedLoad = 40 * time.Second
	// honestReviews are timed without the load and during it.
	honestReviews = 30
)

// TestWebhookUnderForgedLoad measures the example driver's admission webhook
// (deploy/helm/gpu-driver, two replicas) while forgedClients clients on the pod network (here: curl in the control-plane
// node, which reaches pod addresses as any pod does) send it forged reviews without pause: the
// costliest the webhook takes, a DeviceClass UPDATE just under its body limit with the most
// config entries the API allows in the new and the old object, every entry valid GPUConfig and
// none equal. Meanwhile honest claims are created through the API server, one after the other.
// It reports the forged reviews' answers, the honest creates' p50 and p99 without and with the
// load, and the webhook processes' peak resident memory (VmHWM); it checks that every honest
// claim is admitted, that invalid config is still denied under the load (the registration's
// failurePolicy Fail: a review the webhook refuses (429) or lets time out is a denial; with Ignore
// it was an admission), and that no webhook container restarted.
// Not in make test (KIND_TEST_SKIP in hack/test.sh): a measurement, about 90 s.
func TestWebhookUnderForgedLoad(t *testing.T) {
	connect(t) // the cluster's checks
	// Without client-go's default limit (5 QPS), which would time the
	// limiter rather than the creates.
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	config.QPS, config.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pods, err := client.CoreV1().Pods(gpuNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gpu-driver,app.kubernetes.io/component=webhook"})
	if err != nil {
		t.Fatal(err)
	}
	var targets []v1.Pod
	for _, pod := range pods.Items {
		if pod.Status.Phase == v1.PodRunning && pod.Status.PodIP != "" {
			targets = append(targets, pod)
		}
	}
	if len(targets) == 0 {
		t.Fatalf("no running webhook pod in %s (deploy it with hack/kind-deploy-driver.sh gpu-driver)", gpuNamespace)
	}
	restarts := webhookRestarts(targets)

	loader := clusterName + "-control-plane"
	body := forgedGPUReview(t)
	// Through stdin: /tmp in a kind node is a tmpfs, which docker cp does not write to.
	copyIn := exec.CommandContext(ctx, "docker", "exec", "-i", loader, "sh", "-c", "cat > /tmp/forged.json")
	copyIn.Stdin = bytes.NewReader(body)
	if out, err := copyIn.CombinedOutput(); err != nil {
		t.Fatalf("copy the forged review into %s: %v: %s", loader, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "exec", loader, "rm", "-f", "/tmp/forged.json").Run() })

	namespace := fmt.Sprintf("kind-webhook-load-%d", time.Now().Unix())
	if err := e2eframework.CreateNamespace(ctx, client, namespace); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), namespace, metav1.DeleteOptions{})
	})

	// One forged review first: the webhook must take it (validate it, answer 200), or the load
	// measures nothing.
	probe := dockerExec(ctx, t, loader, fmt.Sprintf("curl -sk -H 'Expect:' -H 'Content-Type: application/json' --data-binary @/tmp/forged.json -w '\\n%%{http_code}' 'https://%s:8443/validate?timeout=10s'", targets[0].Status.PodIP))
	if !strings.HasSuffix(strings.TrimSpace(probe), "200") {
		t.Fatalf("a forged review to %s: %s", targets[0].Name, probe)
	}
	t.Logf("a forged review answered: %s", strings.TrimSpace(probe))

	before := timeHonestCreates(t, client, namespace, "before", honestReviews)

	// The load: forgedClients loops of curl, spread over the webhook pods, for forgedLoad.
	var script strings.Builder
	fmt.Fprintf(&script, "end=$(($(date +%%s)+%d)); ", int(forgedLoad.Seconds()))
	for i := range forgedClients {
		target := targets[i%len(targets)]
		fmt.Fprintf(&script, "(while [ $(date +%%s) -lt $end ]; do curl -sk -o /dev/null -w '%%{http_code}\\n' --max-time 15 -H 'Expect:' -H 'Content-Type: application/json' --data-binary @/tmp/forged.json 'https://%s:8443/validate?timeout=10s'; done) & ", target.Status.PodIP)
	}
	script.WriteString("wait")
	var (
		loadOut []byte
		loadErr error
		loaded  sync.WaitGroup
	)
	start := time.Now()
	loaded.Go(func() {
		loadOut, loadErr = exec.CommandContext(ctx, "docker", "exec", loader, "sh", "-c", script.String()).Output()
	})
	time.Sleep(3 * time.Second) // the forged reviews are under way
	during := timeHonestCreates(t, client, namespace, "during", honestReviews)
	// Invalid config still denied: the webhook answers within the API server's timeout.
	for i := range 5 {
		claim := e2eframework.ClaimTemplateFor(namespace, fmt.Sprintf("mps-%d", i), gpuDriver, gpuDriver, gpuConfig("MPS"))
		if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, claim, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), `sharing must be Exclusive or TimeSlicing, got "MPS"`) {
			t.Errorf("invalid GPUConfig under the forged load: %v, want the webhook's denial", err)
		}
	}
	honestDone := time.Since(start)
	loaded.Wait()
	if loadErr != nil {
		t.Fatalf("forged load from %s: %v", loader, loadErr)
	}
	codes := map[string]int{}
	for _, code := range strings.Fields(string(loadOut)) {
		codes[code]++
	}
	total := 0
	for _, n := range codes {
		total += n
	}
	elapsed := time.Since(start).Seconds()

	p50, p99 := quantiles(before)
	t.Logf("honest claim creates through the API server, %d without the load: p50 %v, p99 %v", len(before), p50, p99)
	p50, p99 = quantiles(during)
	t.Logf("honest claim creates during the forged load (%d within %.1fs): p50 %v, p99 %v", len(during), honestDone.Seconds(), p50, p99)
	t.Logf("forged reviews (%d bytes) from %d clients over %.0fs: %d answered (%.1f/s), by HTTP status %v (429: refused, a slot for large requests was busy; 000: no answer)",
		len(body), forgedClients, elapsed, total, float64(total)/elapsed, codes)
	if p99 > 5*time.Second {
		t.Errorf("honest creates p99 %v under the load: the webhook's registration (deploy/helm/gpu-driver/templates/webhook.yaml) times out at 5s", p99)
	}
	if total == 0 {
		t.Error("no forged review was answered: the load did not reach the webhook")
	}
	for _, target := range targets {
		hwm := dockerExec(ctx, t, target.Spec.NodeName, `for p in $(pgrep -f -- '[-]mode=webhook'); do grep -E '^(VmHWM|VmRSS)' /proc/$p/status | tr -s ' \t' ' ' | tr '\n' ' '; echo; done`)
		t.Logf("webhook pod %s on %s: %s", target.Name, target.Spec.NodeName, strings.TrimSpace(hwm))
		for _, kib := range regexp.MustCompile(`VmHWM: (\d+) kB`).FindAllStringSubmatch(hwm, -1) {
			if n, _ := strconv.Atoi(kib[1]); n > 128<<10 {
				t.Errorf("webhook pod %s: peak resident memory %d KiB, over its 128 MiB limit", target.Name, n)
			}
		}
	}
	pods, err = client.CoreV1().Pods(gpuNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gpu-driver,app.kubernetes.io/component=webhook"})
	if err != nil {
		t.Fatal(err)
	}
	if after := webhookRestarts(pods.Items); !maps.Equal(after, restarts) {
		t.Errorf("webhook container restarts %v, were %v: the load killed a webhook", after, restarts)
	}
}

// webhookRestarts returns the restart count of each webhook pod's containers.
func webhookRestarts(pods []v1.Pod) map[string]int32 {
	restarts := map[string]int32{}
	for _, pod := range pods {
		for _, status := range pod.Status.ContainerStatuses {
			restarts[pod.Name] += status.RestartCount
		}
	}
	return restarts
}

// timeHonestCreates creates n claim templates with valid GPUConfig, one after the other, and
// returns how long each create took (the API server calls the webhook for each).
func timeHonestCreates(t *testing.T, client kubernetes.Interface, namespace, prefix string, n int) []time.Duration {
	t.Helper()
	var took []time.Duration
	for i := range n {
		template := e2eframework.ClaimTemplateFor(namespace, fmt.Sprintf("%s-%d", prefix, i), gpuDriver, gpuDriver, gpuConfig("TimeSlicing"))
		start := time.Now()
		if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(t.Context(), template, metav1.CreateOptions{}); err != nil {
			t.Errorf("honest claim template %s: %v", template.Name, err)
			continue
		}
		took = append(took, time.Since(start))
	}
	return took
}

// quantiles returns the p50 and p99 of samples (the largest for fewer than 100).
func quantiles(samples []time.Duration) (p50, p99 time.Duration) {
	if len(samples) == 0 {
		return 0, 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	at := func(q float64) time.Duration { return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))] }
	return at(0.5).Round(time.Millisecond), at(0.99).Round(time.Millisecond)
}

// forgedGPUReview is the costliest review of the example driver's webhook: a DeviceClass UPDATE
// whose new and old objects carry resourceapi.DeviceConfigMaxSize entries of valid GPUConfig,
// each padded with white space to nearly the API's limit for opaque parameters and none equal,
// the whole padded to just under admission.DefaultMaxRequestBytes. Written by hand: encoding/json
// would compact the parameters' white space away.
func forgedGPUReview(t *testing.T) []byte {
	t.Helper()
	class := func(offset int) string {
		var entries []string
		for i := range resourceapi.DeviceConfigMaxSize {
			entries = append(entries, `{"opaque":{"driver":"`+gpuDriver+`","parameters":{"apiVersion":"gpu.example.com/v1alpha1","kind":"GPUConfig","sharing":"TimeSlicing"`+
				strings.Repeat(" ", resourceapi.OpaqueParametersMaxLength-200-i-offset)+`}}}`)
		}
		return `{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"forged"},"spec":{"config":[` + strings.Join(entries, ",") + `]}}`
	}
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged",` +
		`"kind":{"group":"resource.k8s.io","version":"v1","kind":"DeviceClass"},` +
		`"resource":{"group":"resource.k8s.io","version":"v1","resource":"deviceclasses"},` +
		`"name":"forged","operation":"UPDATE","userInfo":{"username":"forger"},"object":` + class(0) + `,"oldObject":` + class(1) + `}}`
	if !json.Valid([]byte(body)) {
		t.Fatal("forged review is no valid JSON")
	}
	pad := admission.DefaultMaxRequestBytes - len(body) - 1024
	if pad < 0 {
		t.Fatalf("forged review is %d bytes, over the webhook's limit %d", len(body), admission.DefaultMaxRequestBytes)
	}
	return []byte(strings.Replace(body, `"request":{`, `"request":{`+strings.Repeat(" ", pad), 1))
}

// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kindcluster

package kind

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dra-failfast/dra-failfast/internal/certstandin"
	"github.com/dra-failfast/dra-failfast/internal/e2eframework"
)

// The example driver's chart as hack/kind-deploy-driver.sh installs it.
const (
	gpuRelease           = "gpu-driver"
	gpuWebhookService    = "gpu-driver-webhook"
	gpuWebhookDeployment = "gpu-driver-webhook"
	gpuChartSecret       = "gpu-driver-webhook-tls"  // webhook.certificates.source chart
	gpuCertManagerSecret = "gpu-driver-webhook-cert" // cert-manager
	gpuCertificate       = "gpu-driver-webhook"
)

var certManagerCertificates = schema.GroupVersionResource{Group: certstandin.Group, Version: certstandin.Version, Resource: "certificates"}

// TestChartCertificates: the example driver's Helm chart (deploy/helm/gpu-driver), installed by
// hack/kind-deploy-driver.sh in a cluster without cert-manager, and its webhook's certificate
// both ways:
//   - the chart's own: the Secret gpu-driver-webhook-tls, the configuration's caBundle its CA, the
//     serving certificate for the Service's name; the API server trusts the webhook (it denies
//     invalid GPUConfig in the driver's words); helm upgrade keeps the certificate;
//   - cert-manager's definitions arrive without its controller: helm upgrade (source auto) keeps
//     the chart's certificate;
//   - cert-manager arrives (internal/certstandin in this process: cert-manager's own Issuer and
//     Certificate definitions from its module, its selfSigned and CA issuers and its cainjector's
//     caBundle injection; it runs in no Deployment, so source=cert-manager is set): helm upgrade
//     switches to the chart's CA and serving Certificates, the webhook
//     serves the Secret cert-manager wrote, the caBundle is the one injected, the chart's Secret is
//     gone, and the webhook still denies invalid config and admits valid config;
//   - cert-manager renews the serving certificate (a new key, signed by the release's CA) while a
//     stream of valid applies runs: none is denied until every webhook replica serves the new one
//     (renewDuringApplies);
//   - deploy/gpu-driver/manifests.yaml (the chart rendered for cert-manager) passes a server-side
//     dry run, each object against its schema, cert-manager's included;
//   - back to the chart's certificate, cert-manager removed; then source=cert-manager without
//     cert-manager is refused by the chart, naming the value, and nothing changes.
func TestChartCertificates(t *testing.T) {
	client, _ := connect(t)
	ctx := t.Context()
	helm, crdDir := os.Getenv("HELM"), os.Getenv("CERT_MANAGER_CRDS")
	if helm == "" || crdDir == "" {
		t.Fatal("HELM and CERT_MANAGER_CRDS are not set: run this through make test-kind")
	}
	namespace := fmt.Sprintf("kind-chart-%d", time.Now().Unix())
	if err := e2eframework.CreateNamespace(ctx, client, namespace); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), namespace, metav1.DeleteOptions{})
	})
	// upgrade runs helm upgrade, keeping the release's values but those of set. Helm 4 applies
	// server-side: back from cert-manager, the caBundle the chart sets is a field cert-manager's
	// cainjector owns, so that switch needs --force-conflicts (docs/driver-authors.md).
	upgrade := func(ctx context.Context, set ...string) (string, error) {
		args := []string{"upgrade", gpuRelease, filepath.Join("..", "..", "deploy", "helm", "gpu-driver"),
			"--namespace", gpuNamespace, "--reuse-values"}
		for _, s := range set {
			if s == "--force-conflicts" {
				args = append(args, s)
				continue
			}
			args = append(args, "--set", s)
		}
		out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput()
		return string(out), err
	}

	chartTLS := checkWebhookCertificate(ctx, t, client, gpuChartSecret, namespace, "chart")
	if out, err := upgrade(ctx); err != nil {
		t.Fatalf("helm upgrade: %v: %s", err, out)
	}
	if again := checkWebhookCertificate(ctx, t, client, gpuChartSecret, namespace, "chart, upgraded"); again != chartTLS {
		t.Error("helm upgrade made a new certificate: the chart keeps the one of its Secret")
	}

	// cert-manager arrives.
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	standIn := &certstandin.StandIn{Client: client, Dynamic: dynamic.NewForConfigOrDie(config)}
	if standIn.CRDs, err = certstandin.LoadCRDs(crdDir); err != nil {
		t.Fatal(err)
	}
	if err := standIn.InstallCRDs(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	standInCtx, stopStandIn := context.WithCancel(ctx)
	standInDone := make(chan struct{})
	go func() {
		defer close(standInDone)
		standIn.Run(standInCtx, 500*time.Millisecond)
	}()
	restored := false
	t.Cleanup(func() {
		// Whatever failed above, the chart's certificate again for the tests that follow.
		ctx := context.WithoutCancel(ctx)
		if !restored {
			if out, err := upgrade(ctx, "webhook.certificates.source=chart", "--force-conflicts"); err != nil {
				t.Errorf("restoring the chart's certificate: %v: %s", err, out)
			}
		}
		stopStandIn()
		<-standInDone
		if err := standIn.RemoveCRDs(ctx, time.Minute); err != nil {
			t.Errorf("removing cert-manager's definitions: %v", err)
		}
		if !restored {
			if out, err := upgrade(ctx, "webhook.certificates.source=auto"); err != nil {
				t.Errorf("restoring the release's values: %v: %s", err, out)
			}
		}
	})

	// The plain manifests (the chart rendered for cert-manager) as the API server sees them, each
	// object checked against its schema, cert-manager's included (server-side dry run).
	manifests := filepath.Join("..", "..", "deploy", "gpu-driver", "manifests.yaml")
	if out, err := exec.CommandContext(ctx, "kubectl", "apply", "--dry-run=server", "--server-side", "--force-conflicts",
		"--field-manager=manifests-check", "-f", manifests).CombinedOutput(); err != nil {
		t.Errorf("deploy/gpu-driver/manifests.yaml, server-side dry run with cert-manager's definitions: %v: %s", err, out)
	}
	// Definitions without cert-manager's controller (the stand-in is no Deployment): auto stays on
	// the chart's certificate, which keeps being served; a Certificate would never be issued.
	if out, err := upgrade(ctx); err != nil {
		t.Fatalf("helm upgrade with cert-manager's definitions but no controller: %v: %s", err, out)
	}
	certificates := standIn.Dynamic.Resource(certManagerCertificates)
	if _, err := certificates.Namespace(gpuNamespace).Get(ctx, gpuCertificate, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("source auto with cert-manager's definitions but no controller made a Certificate (%v): its Secret would never appear", err)
	}
	checkWebhookCertificate(ctx, t, client, gpuChartSecret, namespace, "cert-manager's definitions, no controller")
	if out, err := upgrade(ctx, "webhook.certificates.source=cert-manager"); err != nil {
		t.Fatalf("helm upgrade with cert-manager in the cluster: %v: %s", err, out)
	}
	if _, err := certificates.Namespace(gpuNamespace).Get(ctx, gpuCertificate, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart with cert-manager in the cluster made no Certificate: %v", err)
	}
	configuration, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, gpuRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := configuration.Annotations[certstandin.InjectCAFromAnnotation], gpuNamespace+"/"+gpuCertificate; got != want {
		t.Errorf("annotation %s=%q, want %q", certstandin.InjectCAFromAnnotation, got, want)
	}
	managerTLS := checkWebhookCertificate(ctx, t, client, gpuCertManagerSecret, namespace, "cert-manager")
	if managerTLS == chartTLS {
		t.Error("with cert-manager the webhook still serves the chart's certificate")
	}
	if _, err := client.CoreV1().Secrets(gpuNamespace).Get(ctx, gpuChartSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the chart's Secret %s outlived the switch to cert-manager: %v", gpuChartSecret, err)
	}

	renewDuringApplies(ctx, t, client, standIn, namespace)

	// Back to the chart's certificate; cert-manager goes.
	if out, err := upgrade(ctx, "webhook.certificates.source=chart", "--force-conflicts"); err != nil {
		t.Fatalf("helm upgrade back to the chart's certificate: %v: %s", err, out)
	}
	checkWebhookCertificate(ctx, t, client, gpuChartSecret, namespace, "chart again")
	stopStandIn()
	<-standInDone
	if err := standIn.RemoveCRDs(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if out, err := upgrade(ctx, "webhook.certificates.source=auto"); err != nil {
		t.Fatalf("helm upgrade, source auto, cert-manager gone: %v: %s", err, out)
	}
	restored = true
	out, err := upgrade(ctx, "webhook.certificates.source=cert-manager")
	if err == nil || !strings.Contains(out, "does not serve cert-manager.io/v1") {
		t.Errorf("source=cert-manager without cert-manager: %v: %s; want the chart's refusal", err, out)
	}
	checkWebhookCertificate(ctx, t, client, gpuChartSecret, namespace, "after the refused upgrade")
}

// checkWebhookCertificate waits until the example driver's webhook serves from secret: the
// configuration's caBundle verifies the Secret's certificate for the Service's name, the
// Deployment is rolled out, and the API server, calling the webhook, gets its denial of invalid
// GPUConfig (in the driver's words) and its admission of valid config. Returns the certificate.
func checkWebhookCertificate(ctx context.Context, t *testing.T, client kubernetes.Interface, secretName, namespace, step string) string {
	t.Helper()
	var secret *v1.Secret
	var problem error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if secret, err = client.CoreV1().Secrets(gpuNamespace).Get(ctx, secretName, metav1.GetOptions{}); err != nil {
			problem = err
			return false, nil
		}
		configuration, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, gpuRelease, metav1.GetOptions{})
		if err != nil {
			problem = err
			return false, nil
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(configuration.Webhooks[0].ClientConfig.CABundle) {
			problem = fmt.Errorf("the configuration's caBundle holds no certificate")
			return false, nil
		}
		block, _ := pem.Decode(secret.Data[v1.TLSCertKey])
		if block == nil {
			problem = fmt.Errorf("Secret %s: tls.crt is no PEM", secretName)
			return false, nil
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			problem = err
			return false, nil
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: gpuWebhookService + "." + gpuNamespace + ".svc", Roots: roots}); err != nil {
			problem = fmt.Errorf("Secret %s's certificate against the caBundle: %w", secretName, err)
			return false, nil
		}
		deployment, err := client.AppsV1().Deployments(gpuNamespace).Get(ctx, gpuWebhookDeployment, metav1.GetOptions{})
		if err != nil || deployment.Status.ObservedGeneration < deployment.Generation ||
			deployment.Status.UpdatedReplicas != *deployment.Spec.Replicas || deployment.Status.AvailableReplicas != *deployment.Spec.Replicas ||
			deployment.Status.Replicas != *deployment.Spec.Replicas {
			problem = fmt.Errorf("Deployment %s not rolled out: %v", gpuWebhookDeployment, err)
			return false, nil
		}
		problem = webhookAnswers(ctx, client, namespace)
		return problem == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: the webhook does not serve from Secret %s: %v", step, secretName, problem)
	}
	return string(secret.Data[v1.TLSCertKey])
}

// webhookAnswers: the API server calls the webhook for a claim template with invalid GPUConfig and
// gets its denial, and admits one with valid config (dry run: nothing is stored).
func webhookAnswers(ctx context.Context, client kubernetes.Interface, namespace string) error {
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	invalid := e2eframework.ClaimTemplateFor(namespace, "mps", gpuDriver, gpuDriver, gpuConfig("MPS"))
	_, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, invalid, dryRun)
	if err == nil || !strings.Contains(err.Error(), `sharing must be Exclusive or TimeSlicing, got "MPS"`) {
		return fmt.Errorf("invalid GPUConfig: %v, want the webhook's denial", err)
	}
	valid := e2eframework.ClaimTemplateFor(namespace, "timeslicing", gpuDriver, gpuDriver, gpuConfig("TimeSlicing"))
	if _, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, valid, dryRun); err != nil {
		return fmt.Errorf("valid GPUConfig: %w", err)
	}
	return nil
}

// renewDuringApplies renews the webhook's serving certificate (the stand-in, as cert-manager does:
// a new key) while applies of a valid claim template run one after another, and counts the
// denials until every webhook replica logged that it reloaded the certificate. The caBundle is
// the release's CA, which signs the old and the new certificate alike: zero denials.
func renewDuringApplies(ctx context.Context, t *testing.T, client kubernetes.Interface, standIn *certstandin.StandIn, namespace string) {
	t.Helper()
	renewed := metav1.Now()
	streamCtx, stop := context.WithCancel(ctx)
	type result struct {
		applies, denials int
		first            error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		valid := e2eframework.ClaimTemplateFor(namespace, "renewal", gpuDriver, gpuDriver, gpuConfig("TimeSlicing"))
		for streamCtx.Err() == nil {
			_, err := client.ResourceV1().ResourceClaimTemplates(namespace).Create(streamCtx, valid, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if streamCtx.Err() != nil {
				break
			}
			r.applies++
			if err != nil {
				r.denials++
				if r.first == nil {
					r.first = err
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		done <- r
	}()
	before, err := client.CoreV1().Secrets(gpuNamespace).Get(ctx, gpuCertManagerSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := standIn.Renew(ctx, gpuNamespace, gpuCertificate); err != nil {
		stop()
		t.Fatalf("renewing the serving certificate: %v", err)
	}
	after, err := client.CoreV1().Secrets(gpuNamespace).Get(ctx, gpuCertManagerSecret, metav1.GetOptions{})
	if err != nil || string(after.Data[v1.TLSCertKey]) == string(before.Data[v1.TLSCertKey]) {
		stop()
		t.Fatalf("the serving certificate was not renewed: %v", err)
	}
	// Until each replica serves the new certificate (it reloads at the first handshake after the
	// kubelet updated the Secret's files, within a minute or two).
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, false, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(gpuNamespace).List(ctx, metav1.ListOptions{LabelSelector: gpuWebhookLabel})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		for _, pod := range pods.Items {
			logs, err := client.CoreV1().Pods(gpuNamespace).GetLogs(pod.Name, &v1.PodLogOptions{SinceTime: &renewed}).DoRaw(ctx)
			if err != nil || !strings.Contains(string(logs), "Reloaded the serving certificate") {
				return false, nil
			}
		}
		return true, nil
	})
	stop()
	r := <-done
	if err != nil {
		t.Errorf("renewal: not every webhook replica reloaded the certificate in 4 min: %v", err)
	}
	t.Logf("renewal: %d valid applies while the webhook replicas took the new certificate (%.0fs), %d denied", r.applies, time.Since(start).Seconds(), r.denials)
	if r.denials > 0 || r.applies == 0 {
		t.Errorf("renewal: %d of %d valid applies denied (first: %v), want none", r.denials, r.applies, r.first)
	}
}

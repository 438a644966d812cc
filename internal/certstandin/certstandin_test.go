// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package certstandin

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func certManagerObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version,
		"kind":       kind,
		"metadata":   map[string]any{"namespace": namespace, "name": name, "uid": "uid-" + name},
		"spec":       spec,
	}}
}

func webhookCert(issuer string) *unstructured.Unstructured {
	return certManagerObject("Certificate", "drv", "webhook-cert", map[string]any{
		"dnsNames":   []any{"webhook.drv.svc"},
		"secretName": "webhook-cert",
		"issuerRef":  map[string]any{"kind": "Issuer", "name": issuer},
	})
}

func newStandIn(t *testing.T, objects []runtime.Object, cmObjects ...runtime.Object) *StandIn {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{certificates: "CertificateList", issuers: "IssuerList"}
	return &StandIn{
		Client:  fake.NewClientset(objects...),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, cmObjects...),
	}
}

func TestSync(t *testing.T) {
	selfSigned := certManagerObject("Issuer", "drv", "self", map[string]any{"selfSigned": map[string]any{}})
	acme := certManagerObject("Issuer", "drv", "acme", map[string]any{"acme": map[string]any{"server": "x"}})
	annotated := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "drv-webhook", Annotations: map[string]string{InjectCAFromAnnotation: "drv/webhook-cert"}},
		Webhooks:   []admissionv1.ValidatingWebhook{{Name: "a.example.com"}, {Name: "b.example.com"}},
	}
	other := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Webhooks:   []admissionv1.ValidatingWebhook{{Name: "c.example.com", ClientConfig: admissionv1.WebhookClientConfig{CABundle: []byte("keep")}}},
	}
	badAnnotation := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Annotations: map[string]string{InjectCAFromAnnotation: "no-slash"}},
		Webhooks:   []admissionv1.MutatingWebhook{{Name: "d.example.com"}},
	}
	tests := map[string]struct {
		objects    []runtime.Object
		cm         []runtime.Object
		wantSecret bool
		wantErrs   []string
	}{
		"self-signed issuer: secret issued, CA injected into every webhook": {
			objects:    []runtime.Object{annotated, other},
			cm:         []runtime.Object{selfSigned, webhookCert("self")},
			wantSecret: true,
		},
		"another issuer kind: reported, nothing written": {
			objects:  []runtime.Object{annotated},
			cm:       []runtime.Object{acme, webhookCert("acme")},
			wantErrs: []string{"Certificate drv/webhook-cert: Issuer acme: not supported by the cert-manager stand-in (only spec.selfSigned and spec.ca)"},
		},
		"missing issuer: reported": {
			cm:       []runtime.Object{webhookCert("gone")},
			wantErrs: []string{"Certificate drv/webhook-cert: reading Issuer gone"},
		},
		"malformed annotation: names the configuration": {
			objects:  []runtime.Object{badAnnotation},
			wantErrs: []string{`MutatingWebhookConfiguration bad: annotation cert-manager.io/inject-ca-from="no-slash": want NAMESPACE/CERTIFICATE`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := newStandIn(t, tc.objects, tc.cm...)
			errs := s.Sync(ctx)
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors %v, want %d: %v", errs, len(tc.wantErrs), tc.wantErrs)
			}
			for i, want := range tc.wantErrs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %q, want it to contain %q", errs[i], want)
				}
			}
			secret, err := s.Client.CoreV1().Secrets("drv").Get(ctx, "webhook-cert", metav1.GetOptions{})
			if gotSecret := err == nil; gotSecret != tc.wantSecret {
				t.Fatalf("secret issued: %v, want %v (%v)", gotSecret, tc.wantSecret, err)
			}
			if !tc.wantSecret {
				return
			}
			if secret.Type != v1.SecretTypeTLS || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].Name != "webhook-cert" {
				t.Errorf("secret: type %s, owners %v", secret.Type, secret.OwnerReferences)
			}
			if _, err := tls.X509KeyPair(secret.Data[v1.TLSCertKey], secret.Data[v1.TLSPrivateKeyKey]); err != nil {
				t.Errorf("tls.crt and tls.key are no key pair: %v", err)
			}
			// Round two: the CA is in place; nothing changes, nothing fails.
			if errs := s.Sync(ctx); len(errs) != 0 {
				t.Errorf("second round: %v", errs)
			}
			got, err := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, annotated.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			for _, w := range got.Webhooks {
				if string(w.ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
					t.Errorf("webhook %s: caBundle %q, want the secret's ca.crt", w.Name, w.ClientConfig.CABundle)
				}
				pool.AppendCertsFromPEM(w.ClientConfig.CABundle)
			}
			block, _ := pem.Decode(secret.Data[v1.TLSCertKey])
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: "webhook.drv.svc", Roots: pool}); err != nil {
				t.Errorf("the served certificate does not verify against the injected CA: %v", err)
			}
			untouched, _ := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, other.Name, metav1.GetOptions{})
			if string(untouched.Webhooks[0].ClientConfig.CABundle) != "keep" {
				t.Errorf("a configuration without the annotation was changed: %q", untouched.Webhooks[0].ClientConfig.CABundle)
			}
		})
	}
}

func TestSelfSigned(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	certPEM, _, err := SelfSigned([]string{"a.ns.svc", "b"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "a.ns.svc" || len(cert.DNSNames) != 2 || !cert.NotAfter.Equal(now.Add(time.Hour)) {
		t.Errorf("certificate: CN %s, DNS names %v, not after %s", cert.Subject.CommonName, cert.DNSNames, cert.NotAfter)
	}
	if _, _, err := SelfSigned(nil, now, time.Hour); err == nil || errors.Is(err, errUnsupported) {
		t.Errorf("no DNS names: %v, want an error", err)
	}
}

func TestLoadCRDs(t *testing.T) {
	crd := func(kind, group string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: " + kind + "\nmetadata:\n  name: x\nspec:\n  group: " + group + "\n"
	}
	tests := map[string]struct {
		files   map[string]string
		wantErr string
	}{
		"both definitions": {files: map[string]string{
			"cert-manager.io_issuers.yaml":      crd("CustomResourceDefinition", Group),
			"cert-manager.io_certificates.yaml": crd("CustomResourceDefinition", Group),
		}},
		"a file missing: named": {
			files:   map[string]string{"cert-manager.io_issuers.yaml": crd("CustomResourceDefinition", Group)},
			wantErr: "cert-manager.io_certificates.yaml",
		},
		"another group: named": {
			files: map[string]string{
				"cert-manager.io_issuers.yaml":      crd("CustomResourceDefinition", "acme.cert-manager.io"),
				"cert-manager.io_certificates.yaml": crd("CustomResourceDefinition", Group),
			},
			wantErr: `cert-manager.io_issuers.yaml: a CustomResourceDefinition of group "acme.cert-manager.io"`,
		},
		"not YAML: named": {
			files: map[string]string{
				"cert-manager.io_issuers.yaml":      "{",
				"cert-manager.io_certificates.yaml": crd("CustomResourceDefinition", Group),
			},
			wantErr: "cert-manager.io_issuers.yaml",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for file, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := LoadCRDs(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != 2 {
				t.Fatalf("got %d definitions, %v; want 2", len(got), err)
			}
		})
	}
}

func TestInstallAndRemoveCRDs(t *testing.T) {
	ctx := t.Context()
	foreign := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "certificates." + Group},
	}}
	tests := map[string]struct {
		existing []runtime.Object
		wantErr  string
		wantLeft []string
	}{
		"the stand-in's own: removed": {},
		"a real cert-manager's Certificate definition: left alone, named": {
			existing: []runtime.Object{foreign},
			wantErr:  "CustomResourceDefinition certificates.cert-manager.io was not created by the cert-manager stand-in",
			wantLeft: []string{"certificates." + Group},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			listKinds := map[schema.GroupVersionResource]string{certificates: "CertificateList", issuers: "IssuerList", crds: "CustomResourceDefinitionList"}
			s := &StandIn{
				Client:  fake.NewClientset(),
				Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, tc.existing...),
			}
			if err := s.InstallCRDs(ctx, time.Second); err != nil {
				t.Fatal(err)
			}
			err := s.RemoveCRDs(ctx, time.Second)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("RemoveCRDs: %v, want %q", err, tc.wantErr)
			}
			list, err := s.Dynamic.Resource(crds).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, item := range list.Items {
				left = append(left, item.GetName())
			}
			if strings.Join(left, ",") != strings.Join(tc.wantLeft, ",") {
				t.Errorf("definitions left %v, want %v", left, tc.wantLeft)
			}
		})
	}
}

// TestCAIssuerAndRenew: a self-signed Issuer makes a CA Certificate (isCA, a common name only), a
// CA Issuer signs the serving certificate with it; the webhook's caBundle is the CA. Renewing the
// serving certificate gives it a new key and leaves the caBundle as it was, which still verifies
// the new certificate.
func TestCAIssuerAndRenew(t *testing.T) {
	ctx := t.Context()
	annotated := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "drv-webhook", Annotations: map[string]string{InjectCAFromAnnotation: "drv/webhook-cert"}},
		Webhooks:   []admissionv1.ValidatingWebhook{{Name: "a.example.com"}},
	}
	s := newStandIn(t, []runtime.Object{annotated},
		certManagerObject("Issuer", "drv", "self", map[string]any{"selfSigned": map[string]any{}}),
		certManagerObject("Certificate", "drv", "ca", map[string]any{
			"isCA": true, "commonName": "drv webhook CA", "secretName": "ca-secret",
			"issuerRef": map[string]any{"kind": "Issuer", "name": "self"},
		}),
		certManagerObject("Issuer", "drv", "ca-issuer", map[string]any{"ca": map[string]any{"secretName": "ca-secret"}}),
		webhookCert("ca-issuer"),
	)
	// Two rounds at most: the serving certificate waits for the CA's Secret.
	if errs := s.Sync(ctx); len(errs) > 0 {
		if errs := s.Sync(ctx); len(errs) != 0 {
			t.Fatalf("second round: %v", errs)
		}
	}
	caSecret, err := s.Client.CoreV1().Secrets("drv").Get(ctx, "ca-secret", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	served := func() (*x509.Certificate, []byte) {
		t.Helper()
		secret, err := s.Client.CoreV1().Secrets("drv").Get(ctx, "webhook-cert", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(secret.Data["ca.crt"]) != string(caSecret.Data[v1.TLSCertKey]) {
			t.Errorf("serving Secret's ca.crt is not the CA's certificate")
		}
		block, _ := pem.Decode(secret.Data[v1.TLSCertKey])
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert, secret.Data[v1.TLSCertKey]
	}
	caBundle := func() []byte {
		t.Helper()
		if errs := s.Sync(ctx); len(errs) != 0 {
			t.Fatalf("sync: %v", errs)
		}
		got, err := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, annotated.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Webhooks[0].ClientConfig.CABundle
	}
	verify := func(cert *x509.Certificate, bundle []byte) {
		t.Helper()
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(bundle)
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: "webhook.drv.svc", Roots: pool}); err != nil {
			t.Errorf("the serving certificate does not verify against the caBundle: %v", err)
		}
		if cert.IsCA {
			t.Error("the serving certificate is a CA")
		}
	}
	first, firstPEM := served()
	bundle := caBundle()
	verify(first, bundle)

	if err := s.Renew(ctx, "drv", "webhook-cert"); err != nil {
		t.Fatal(err)
	}
	renewed, renewedPEM := served()
	if string(renewedPEM) == string(firstPEM) || renewed.PublicKey.(*ecdsa.PublicKey).Equal(first.PublicKey) {
		t.Error("Renew kept the certificate or its key")
	}
	if again := caBundle(); string(again) != string(bundle) {
		t.Error("renewing the serving certificate changed the caBundle")
	}
	verify(renewed, bundle)
}

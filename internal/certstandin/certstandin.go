// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package certstandin stands in for cert-manager in test clusters that cannot install it (its
// chart and images come from repositories these machines cannot reach). It serves the part of
// cert-manager's API that DRA drivers' Helm charts use for their webhooks, and nothing more:
//   - the Issuer and Certificate kinds (cert-manager.io/v1), as CustomResourceDefinitions that keep
//     any field;
//   - a Certificate whose issuerRef names an Issuer with spec.selfSigned gets its Secret
//     (spec.secretName, type kubernetes.io/tls): a self-signed ECDSA P-256 certificate for
//     spec.dnsNames, with tls.crt, tls.key and ca.crt (the certificate itself), as cert-manager's
//     selfSigned issuer writes it;
//   - a validating or mutating webhook configuration annotated cert-manager.io/inject-ca-from:
//     NAMESPACE/CERTIFICATE gets that Secret's ca.crt as every webhook's caBundle, as cert-manager's
//     cainjector does.
//
// Anything else (another issuer kind, a Certificate without dnsNames) is reported in the log
// naming the object and left alone: the stand-in never writes what it does not understand.
// Certificates are not renewed and get no status.
package certstandin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

const (
	// Group is cert-manager's API group; Version the one charts use.
	Group   = "cert-manager.io"
	Version = "v1"
	// InjectCAFromAnnotation names, on a webhook configuration, the Certificate whose CA goes into
	// its caBundle.
	InjectCAFromAnnotation = "cert-manager.io/inject-ca-from"
	// CertificateLifetime is the validity of the certificates the stand-in makes: longer than any
	// test run.
	CertificateLifetime = 7 * 24 * time.Hour
)

var (
	certificates   = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "certificates"}
	issuers        = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "issuers"}
	crds           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	errUnsupported = errors.New("not supported by the cert-manager stand-in")
)

// StandIn reconciles Certificates and webhook configurations as described in the package comment.
type StandIn struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Now is the clock of the certificates' validity; time.Now if nil.
	Now func() time.Time
}

// InstallCRDs creates the Issuer and Certificate CustomResourceDefinitions (existing ones are
// left as they are) and waits until the API server serves both.
func (s *StandIn) InstallCRDs(ctx context.Context, timeout time.Duration) error {
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata": map[string]any{
				"name":   plural + "." + Group,
				"labels": map[string]any{"app.kubernetes.io/managed-by": "dra-failfast-cert-standin"},
			},
			"spec": map[string]any{
				"group": Group,
				"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
				"scope": "Namespaced",
				"versions": []any{map[string]any{
					"name": Version, "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{
						"type": "object", "x-kubernetes-preserve-unknown-fields": true,
					}},
				}},
			},
		}}
		if _, err := s.Dynamic.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CustomResourceDefinition %s: %w", crd.GetName(), err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, gvr := range []schema.GroupVersionResource{issuers, certificates} {
			if _, err := s.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// Run reconciles every interval until ctx is done. Errors are logged, naming the object, and the
// object is tried again at the next round.
func (s *StandIn) Run(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, err := range s.Sync(ctx) {
			logger.Error(err, "cert-manager stand-in")
		}
	}, interval)
}

// Sync runs one round: every Certificate's Secret, then every annotated webhook configuration's
// caBundle. It returns what went wrong, one error per object.
func (s *StandIn) Sync(ctx context.Context) []error {
	var errs []error
	list, err := s.Dynamic.Resource(certificates).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []error{fmt.Errorf("listing Certificates: %w", err)}
	}
	for i := range list.Items {
		if err := s.issue(ctx, &list.Items[i]); err != nil {
			errs = append(errs, fmt.Errorf("Certificate %s/%s: %w", list.Items[i].GetNamespace(), list.Items[i].GetName(), err))
		}
	}
	return append(errs, s.injectCAs(ctx)...)
}

// issue makes cert's Secret unless it exists.
func (s *StandIn) issue(ctx context.Context, cert *unstructured.Unstructured) error {
	namespace := cert.GetNamespace()
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	issuerKind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
	issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	switch {
	case secretName == "":
		return fmt.Errorf("spec.secretName is empty")
	case len(dnsNames) == 0:
		return fmt.Errorf("spec.dnsNames is empty: %w", errUnsupported)
	case issuerKind != "" && issuerKind != "Issuer":
		return fmt.Errorf("issuerRef.kind %s: %w (only Issuer)", issuerKind, errUnsupported)
	}
	if _, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading Secret %s: %w", secretName, err)
	}
	issuer, err := s.Dynamic.Resource(issuers).Namespace(namespace).Get(ctx, issuerName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Issuer %s: %w", issuerName, err)
	}
	if _, selfSigned, _ := unstructured.NestedMap(issuer.Object, "spec", "selfSigned"); !selfSigned {
		return fmt.Errorf("Issuer %s: %w (only spec.selfSigned)", issuerName, errUnsupported)
	}
	certPEM, keyPEM, err := SelfSigned(dnsNames, s.now(), CertificateLifetime)
	if err != nil {
		return err
	}
	secret := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretName, Namespace: namespace,
			Annotations: map[string]string{"cert-manager.io/certificate-name": cert.GetName()},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: Group + "/" + Version, Kind: "Certificate", Name: cert.GetName(), UID: cert.GetUID(),
			}},
		},
		Type: v1.SecretTypeTLS,
		Data: map[string][]byte{v1.TLSCertKey: certPEM, v1.TLSPrivateKeyKey: keyPEM, "ca.crt": certPEM},
	}
	if _, err := s.Client.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s: %w", secretName, err)
	}
	klog.FromContext(ctx).Info("Issued self-signed certificate", "certificate", klog.KObj(cert), "secret", secretName, "dnsNames", dnsNames)
	return nil
}

// injectCAs sets the caBundle of every webhook in every configuration annotated with
// InjectCAFromAnnotation.
func (s *StandIn) injectCAs(ctx context.Context) []error {
	var errs []error
	validating, err := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []error{fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)}
	}
	for _, c := range validating.Items {
		current := make([][]byte, len(c.Webhooks))
		for i := range c.Webhooks {
			current[i] = c.Webhooks[i].ClientConfig.CABundle
		}
		if err := s.inject(ctx, "validatingwebhookconfigurations", c.Name, c.Annotations, current); err != nil {
			errs = append(errs, fmt.Errorf("ValidatingWebhookConfiguration %s: %w", c.Name, err))
		}
	}
	mutating, err := s.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(errs, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err))
	}
	for _, c := range mutating.Items {
		current := make([][]byte, len(c.Webhooks))
		for i := range c.Webhooks {
			current[i] = c.Webhooks[i].ClientConfig.CABundle
		}
		if err := s.inject(ctx, "mutatingwebhookconfigurations", c.Name, c.Annotations, current); err != nil {
			errs = append(errs, fmt.Errorf("MutatingWebhookConfiguration %s: %w", c.Name, err))
		}
	}
	return errs
}

// inject patches the configuration's webhooks whose caBundle differs from the CA its annotation
// names. current holds each webhook's caBundle, in order.
func (s *StandIn) inject(ctx context.Context, resource, name string, annotations map[string]string, current [][]byte) error {
	from, ok := annotations[InjectCAFromAnnotation]
	if !ok {
		return nil
	}
	namespace, certName, ok := strings.Cut(from, "/")
	if !ok || namespace == "" || certName == "" {
		return fmt.Errorf("annotation %s=%q: want NAMESPACE/CERTIFICATE", InjectCAFromAnnotation, from)
	}
	cert, err := s.Dynamic.Resource(certificates).Namespace(namespace).Get(ctx, certName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Certificate %s named by %s: %w", from, InjectCAFromAnnotation, err)
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	secret, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // not issued yet: the next round
	} else if err != nil {
		return fmt.Errorf("reading Secret %s/%s: %w", namespace, secretName, err)
	}
	ca := secret.Data["ca.crt"]
	if len(ca) == 0 {
		return fmt.Errorf("Secret %s/%s has no ca.crt", namespace, secretName)
	}
	var ops []string
	for i, bundle := range current {
		if !bytes.Equal(bundle, ca) {
			// caBundle is bytes: base64 in JSON.
			ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/webhooks/%d/clientConfig/caBundle","value":"%s"}`, i, base64.StdEncoding.EncodeToString(ca)))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	patch := []byte("[" + strings.Join(ops, ",") + "]")
	if resource == "validatingwebhookconfigurations" {
		_, err = s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = s.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("setting caBundle: %w", err)
	}
	klog.FromContext(ctx).Info("Injected CA", "resource", resource, "name", name, "from", from, "webhooks", len(ops))
	return nil
}

func (s *StandIn) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// SelfSigned returns a PEM certificate and PKCS#8 PEM key: ECDSA P-256, self-signed, valid from
// now for lifetime, for dnsNames (the first is also the subject's common name), usable for TLS
// serving and as its own CA.
func SelfSigned(dnsNames []string, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(dnsNames) == 0 {
		return nil, nil, errors.New("no DNS names")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generating serial number: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: dnsNames[0]},
		DNSNames:              dnsNames,
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

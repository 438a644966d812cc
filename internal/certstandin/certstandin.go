// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

// Package certstandin stands in for cert-manager in test clusters that cannot install it (its
// chart and images come from repositories these machines cannot reach). It serves the part of
// cert-manager's API that DRA drivers' Helm charts use for their webhooks, and nothing more:
//   - the Issuer and Certificate kinds (cert-manager.io/v1), as CustomResourceDefinitions that keep
//     any field;
//   - a Certificate whose issuerRef names an Issuer with spec.selfSigned gets its Secret
//     (spec.secretName, type kubernetes.io/tls): a self-signed ECDSA P-256 certificate for
//     spec.dnsNames (or, with spec.isCA, for spec.commonName alone), with tls.crt, tls.key and
//     ca.crt (the certificate itself), as cert-manager's selfSigned issuer writes it;
//   - a Certificate whose Issuer has spec.ca gets one signed with the key of the Secret
//     spec.ca.secretName, ca.crt that Secret's certificate, as cert-manager's CA issuer writes it
//     (once that Secret exists);
//   - Renew deletes a Certificate's Secret: the next round issues a new one (a new key), as a
//     renewal does;
//   - a validating or mutating webhook configuration annotated cert-manager.io/inject-ca-from:
//     NAMESPACE/CERTIFICATE gets that Secret's ca.crt as every webhook's caBundle, as cert-manager's
//     cainjector does.
//
// Anything else (another issuer kind, a Certificate without dnsNames) is reported in the log
// naming the object and left alone: the stand-in never writes what it does not understand.
// Certificates are not renewed and get no status. The definitions are either permissive (any
// field kept) or cert-manager's own (LoadCRDs, from its module's deploy/crds): then the API server
// checks every Issuer and Certificate against cert-manager's schema, as with cert-manager.
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
	"maps"
	"math/big"
	"os"
	"path/filepath"
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
	"sigs.k8s.io/yaml"
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
	certificates = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "certificates"}
	issuers      = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "issuers"}
	crds         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// managedBy marks the definitions the stand-in created: RemoveCRDs deletes no other.
	managedBy      = map[string]string{"app.kubernetes.io/managed-by": "dra-failfast-cert-standin"}
	errUnsupported = errors.New("not supported by the cert-manager stand-in")
)

// StandIn reconciles Certificates and webhook configurations as described in the package comment.
type StandIn struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Now is the clock of the certificates' validity; time.Now if nil.
	Now func() time.Time
	// CRDs are the definitions InstallCRDs creates; nil: permissive ones that keep any field.
	CRDs []*unstructured.Unstructured
}

// crdFiles are the files of cert-manager's deploy/crds that define what the stand-in serves.
var crdFiles = []string{"cert-manager.io_issuers.yaml", "cert-manager.io_certificates.yaml"}

// LoadCRDs reads cert-manager's own Issuer and Certificate CustomResourceDefinitions from dir, its
// module's deploy/crds.
func LoadCRDs(dir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, file := range crdFiles {
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("cert-manager's definitions: %w", err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if group, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); crd.GetKind() != "CustomResourceDefinition" || group != Group {
			return nil, fmt.Errorf("%s: a %s of group %q, want a CustomResourceDefinition of %s", path, crd.GetKind(), group, Group)
		}
		out = append(out, crd)
	}
	return out, nil
}

// permissiveCRDs are Issuer and Certificate definitions that keep any field.
func permissiveCRDs() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, kind := range []string{"Issuer", "Certificate"} {
		plural := strings.ToLower(kind) + "s"
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata":   map[string]any{"name": plural + "." + Group},
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
		}})
	}
	return out
}

// InstallCRDs creates the Issuer and Certificate CustomResourceDefinitions (s.CRDs, or permissive
// ones; existing ones are left as they are) and waits until the API server serves both.
func (s *StandIn) InstallCRDs(ctx context.Context, timeout time.Duration) error {
	definitions := s.CRDs
	if definitions == nil {
		definitions = permissiveCRDs()
	}
	for _, definition := range definitions {
		crd := definition.DeepCopy()
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, managedBy)
		crd.SetLabels(labels)
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

// RemoveCRDs deletes the Issuer and Certificate definitions the stand-in created (never one it
// did not: a cluster's real cert-manager keeps its own), with every Issuer and Certificate, and
// waits until they are gone.
func (s *StandIn) RemoveCRDs(ctx context.Context, timeout time.Duration) error {
	var names []string
	for _, gvr := range []schema.GroupVersionResource{issuers, certificates} {
		name := gvr.Resource + "." + Group
		crd, err := s.Dynamic.Resource(crds).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		}
		if crd.GetLabels()["app.kubernetes.io/managed-by"] != managedBy["app.kubernetes.io/managed-by"] {
			return fmt.Errorf("CustomResourceDefinition %s was not created by the cert-manager stand-in: left alone", name)
		}
		if err := s.Dynamic.Resource(crds).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting CustomResourceDefinition %s: %w", name, err)
		}
		names = append(names, name)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			if _, err := s.Dynamic.Resource(crds).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
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
	isCA, _, _ := unstructured.NestedBool(cert.Object, "spec", "isCA")
	commonName, _, _ := unstructured.NestedString(cert.Object, "spec", "commonName")
	issuerKind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
	issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	switch {
	case secretName == "":
		return fmt.Errorf("spec.secretName is empty")
	case len(dnsNames) == 0 && !(isCA && commonName != ""):
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
	names := dnsNames
	if len(names) == 0 {
		names = []string{commonName}
	}
	var certPEM, keyPEM, caPEM []byte
	_, selfSigned, _ := unstructured.NestedMap(issuer.Object, "spec", "selfSigned")
	caSecretName, ca, _ := unstructured.NestedString(issuer.Object, "spec", "ca", "secretName")
	switch {
	case selfSigned:
		certPEM, keyPEM, err = SelfSigned(names, s.now(), CertificateLifetime)
		caPEM = certPEM
	case ca:
		caSecret, getErr := s.Client.CoreV1().Secrets(namespace).Get(ctx, caSecretName, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("reading the CA Secret %s of Issuer %s: %w", caSecretName, issuerName, getErr)
		}
		caPEM = caSecret.Data[v1.TLSCertKey]
		certPEM, keyPEM, err = SignedBy(names, caPEM, caSecret.Data[v1.TLSPrivateKeyKey], s.now(), CertificateLifetime)
	default:
		return fmt.Errorf("Issuer %s: %w (only spec.selfSigned and spec.ca)", issuerName, errUnsupported)
	}
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
		Data: map[string][]byte{v1.TLSCertKey: certPEM, v1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM},
	}
	if _, err := s.Client.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s: %w", secretName, err)
	}
	klog.FromContext(ctx).Info("Issued certificate", "certificate", klog.KObj(cert), "secret", secretName, "names", names, "issuer", issuerName)
	return nil
}

// Renew makes the next round issue the Certificate namespace/name again, with a new key, as
// cert-manager's renewal does: it deletes the Certificate's Secret.
func (s *StandIn) Renew(ctx context.Context, namespace, name string) error {
	cert, err := s.Dynamic.Resource(certificates).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	// The new Secret replaces the old one: with a delete, its files vanish from the pods for a
	// moment; cert-manager updates in place. Update in place too.
	secret, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := s.Client.CoreV1().Secrets(namespace).Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := s.issue(ctx, cert); err != nil {
		// Put the old one back rather than leave none.
		secret.ResourceVersion = ""
		_, _ = s.Client.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{})
		return err
	}
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

// SignedBy returns a PEM certificate and PKCS#8 PEM key: ECDSA P-256, valid from now for lifetime,
// for dnsNames (the first is also the subject's common name), usable for TLS serving, signed by the
// CA of caCertPEM and caKeyPEM (PKCS#8, SEC 1 or PKCS#1).
func SignedBy(dnsNames []string, caCertPEM, caKeyPEM []byte, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(dnsNames) == 0 {
		return nil, nil, errors.New("no DNS names")
	}
	block, _ := pem.Decode(caCertPEM)
	if block == nil {
		return nil, nil, errors.New("the CA's certificate is no PEM")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the CA's certificate: %w", err)
	}
	keyBlock, _ := pem.Decode(caKeyPEM)
	if keyBlock == nil {
		return nil, nil, errors.New("the CA's key is no PEM")
	}
	caKey, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		if ecKey, ecErr := x509.ParseECPrivateKey(keyBlock.Bytes); ecErr == nil {
			caKey, err = ecKey, nil
		} else if rsaKey, rsaErr := x509.ParsePKCS1PrivateKey(keyBlock.Bytes); rsaErr == nil {
			caKey, err = rsaKey, nil
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the CA's key: %w", err)
	}
	return newCertificate(dnsNames, now, lifetime, caCert, caKey)
}

// SelfSigned returns a PEM certificate and PKCS#8 PEM key: ECDSA P-256, self-signed, valid from
// now for lifetime, for dnsNames (the first is also the subject's common name), usable for TLS
// serving and as its own CA.
func SelfSigned(dnsNames []string, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(dnsNames) == 0 {
		return nil, nil, errors.New("no DNS names")
	}
	return newCertificate(dnsNames, now, lifetime, nil, nil)
}

// newCertificate makes a key and a certificate for dnsNames, valid from now for lifetime, signed by parent
// with parentKey; nil parent: self-signed, and a CA.
func newCertificate(dnsNames []string, now time.Time, lifetime time.Duration, parent *x509.Certificate, parentKey any) (certPEM, keyPEM []byte, err error) {
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
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if parent == nil {
		template.IsCA = true
		template.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

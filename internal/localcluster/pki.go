// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for any test run and short enough to never matter.
const certValidity = 7 * 24 * time.Hour

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// certSpec describes one certificate signed by the cluster CA.
type certSpec struct {
	name   string // file base name under pki/
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []net.IP
}

// writePKI generates the CA, the serving and client certificates and the service-account key
// pair of a cluster into the pki/ directory of p.
func writePKI(p paths, nodeName string, nodeIP net.IP) error {
	if err := os.MkdirAll(p.file("pki"), 0o700); err != nil {
		return err
	}
	ca, err := newCA()
	if err != nil {
		return fmt.Errorf("generating the CA: %w", err)
	}
	if err := writeKeyPair(p.pki("ca"), ca); err != nil {
		return err
	}
	_, svcNet, err := net.ParseCIDR(ServiceClusterIPRange)
	if err != nil {
		return err
	}
	kubernetesSvcIP := make(net.IP, len(svcNet.IP.To4()))
	copy(kubernetesSvcIP, svcNet.IP.To4())
	kubernetesSvcIP[3]++

	specs := []certSpec{
		{
			name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", nodeName, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.IPv4(127, 0, 0, 1), nodeIP, kubernetesSvcIP},
		},
		{name: "admin", cn: "kubernetes-admin", orgs: []string{"system:masters"}, client: true},
		{name: "kubelet", cn: "system:node:" + nodeName, orgs: []string{"system:nodes"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		// The apiserver's identity towards the kubelet (logs, exec, port-forward).
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		// The apiserver's identity towards aggregated API servers; delegated authentication in
		// kube-controller-manager and kube-scheduler wants its request-header CA.
		{name: "front-proxy-client", cn: "front-proxy-client", client: true},
	}
	for i, spec := range specs {
		kp, err := newCert(ca, spec, int64(i+2))
		if err != nil {
			return fmt.Errorf("generating certificate %s: %w", spec.name, err)
		}
		if err := writeKeyPair(p.pki(spec.name), kp); err != nil {
			return err
		}
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(p.pki("sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return writePEM(p.pki("sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func newCA() (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dra-failfast-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert: cert, key: key}, err
}

func newCert(ca keyPair, spec certSpec, serial int64) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert: cert, key: key}, err
}

// writeKeyPair writes base.crt and base.key.
func writeKeyPair(base string, kp keyPair) error {
	if err := writePEM(base+".crt", "CERTIFICATE", kp.cert.Raw, 0o644); err != nil {
		return err
	}
	return writeKey(base+".key", kp.key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readCA loads the cluster CA from the pki/ directory of p.
func readCA(p paths) (keyPair, error) {
	certPEM, err := os.ReadFile(p.pki("ca.crt"))
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := os.ReadFile(p.pki("ca.key"))
	if err != nil {
		return keyPair{}, err
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return keyPair{}, fmt.Errorf("%s: no PEM data", p.pki("ca"))
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%s: %w", p.pki("ca.crt"), err)
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%s: %w", p.pki("ca.key"), err)
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return keyPair{}, fmt.Errorf("%s: not an ECDSA key", p.pki("ca.key"))
	}
	return keyPair{cert: cert, key: ecKey}, nil
}

// CABundle is the PEM certificate of the cluster CA: the caBundle of a webhook
// whose serving certificate came from IssueServingCert.
func (c *Cluster) CABundle() ([]byte, error) {
	return os.ReadFile(c.p.pki("ca.crt"))
}

// IssueServingCert writes a serving certificate for ips and dnsNames, signed
// by the cluster CA, as pki/<name>.crt and pki/<name>.key, and returns their
// paths (for example for an admission webhook of a test driver).
func (c *Cluster) IssueServingCert(name string, ips []net.IP, dnsNames []string) (certFile, keyFile string, err error) {
	ca, err := readCA(c.p)
	if err != nil {
		return "", "", fmt.Errorf("cluster CA: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", err
	}
	kp, err := newCert(ca, certSpec{name: name, cn: name, server: true, ips: ips, dns: dnsNames}, serial.Int64()+1000)
	if err != nil {
		return "", "", fmt.Errorf("serving certificate %s: %w", name, err)
	}
	base := c.p.pki(name)
	if err := writeKeyPair(base, kp); err != nil {
		return "", "", err
	}
	return base + ".crt", base + ".key", nil
}

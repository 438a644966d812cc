// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func TestParseFeatureGates(t *testing.T) {
	got, err := ParseFeatureGates("B=false, A=true,,")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"A": true, "B": false}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if s := featureGatesFlag(got); s != "A=true,B=false" {
		t.Errorf("featureGatesFlag = %q", s)
	}
	for _, bad := range []string{"A", "A=yes"} {
		if _, err := ParseFeatureGates(bad); err == nil {
			t.Errorf("ParseFeatureGates(%q) succeeded", bad)
		}
	}
}

func TestWriteConfigs(t *testing.T) {
	p := paths{t.TempDir()}
	if err := writePKI(p, "node-a", net.ParseIP("192.0.2.10")); err != nil {
		t.Fatalf("writePKI: %v", err)
	}
	caPEM, err := os.ReadFile(p.pki("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert := readCert(t, p.pki("apiserver.crt"))
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "kubernetes.default.svc"}); err != nil {
		t.Errorf("apiserver certificate: %v", err)
	}
	for _, ip := range []string{"127.0.0.1", "192.0.2.10", "10.0.0.1"} {
		if err := cert.VerifyHostname(ip); err != nil {
			t.Errorf("apiserver certificate lacks %s: %v", ip, err)
		}
	}
	kubelet := readCert(t, p.pki("kubelet.crt"))
	if kubelet.Subject.CommonName != "system:node:node-a" || !reflect.DeepEqual(kubelet.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("kubelet certificate subject = %v", kubelet.Subject)
	}
	if _, err := kubelet.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("kubelet certificate: %v", err)
	}

	if err := writeKubeconfigs(p); err != nil {
		t.Fatalf("writeKubeconfigs: %v", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig(userAdmin))
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	if rc.Host != apiServerURL() || len(rc.CertData) == 0 || len(rc.CAData) == 0 {
		t.Errorf("admin kubeconfig: host %q, %d bytes of cert, %d of CA", rc.Host, len(rc.CertData), len(rc.CAData))
	}

	conf := containerdConfig(p, p.cdiDir())
	for _, want := range []string{"restrict_oom_score_adj = true", "netns_mounts_under_state_dir = true",
		`sandbox = "` + PauseImage + `"`, `cdi_spec_dirs = ["` + p.cdiDir() + `"]`, "disable = true"} {
		if !strings.Contains(conf, want) {
			t.Errorf("containerd config lacks %q", want)
		}
	}
	for _, line := range strings.Split(conf, "\n") {
		if strings.Contains(line, "/") && !strings.Contains(line, p.state) && !strings.Contains(line, "/usr/lib/cni") &&
			!strings.Contains(line, PauseImage) {
			t.Errorf("containerd config line points outside the state directory: %s", line)
		}
	}

	kc, err := kubeletConfig(p, Config{KubeletFeatureGates: map[string]bool{"X": true}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(kc, &m); err != nil {
		t.Fatal(err)
	}
	if m["failCgroupV1"] != false || m["cgroupDriver"] != "cgroupfs" || m["address"] != "0.0.0.0" ||
		!reflect.DeepEqual(m["featureGates"], map[string]any{"X": true}) {
		t.Errorf("kubelet config: %s", kc)
	}
	if _, set := m["syncFrequency"]; set {
		t.Errorf("syncFrequency set without KubeletSyncFrequency: %s", kc)
	}
	kc, err = kubeletConfig(p, Config{KubeletSyncFrequency: 10 * time.Second})
	if err != nil || !strings.Contains(string(kc), `"syncFrequency": "10s"`) {
		t.Errorf("kubelet config with KubeletSyncFrequency 10s: %v %s", err, kc)
	}
	if _, set := m["kubeAPIQPS"]; set {
		t.Errorf("kubeAPIQPS set without KubeletAPIQPS: %s", kc)
	}
	kc, err = kubeletConfig(p, Config{KubeletAPIQPS: 200})
	if err != nil || !strings.Contains(string(kc), `"kubeAPIQPS": 200`) || !strings.Contains(string(kc), `"kubeAPIBurst": 400`) {
		t.Errorf("kubelet config with KubeletAPIQPS 200: %v %s", err, kc)
	}
	if _, err := cniConfList(p); err != nil {
		t.Fatal(err)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestMentions(t *testing.T) {
	dir := "/x/state"
	for arg, want := range map[string]bool{
		"--data-dir=/x/state/etcd": true,
		"/x/state":                 true,
		"--root=/x/state2":         false,
		"--other=/y":               false,
	} {
		if got := mentions([]string{arg}, dir); got != want {
			t.Errorf("mentions(%q) = %v, want %v", arg, got, want)
		}
	}
}

func TestUnescapeMountPath(t *testing.T) {
	if got := unescapeMountPath(`/a\040b/c`); got != "/a b/c" {
		t.Errorf("got %q", got)
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "localcluster")); err != nil {
		t.Errorf("RepoRoot() = %s: %v", root, err)
	}
}

// A serving certificate issued later (e.g. for an admission webhook) is
// trusted through CABundle for the addresses it was issued for.
func TestIssueServingCert(t *testing.T) {
	p := paths{t.TempDir()}
	if err := writePKI(p, "node-a", net.ParseIP("192.0.2.10")); err != nil {
		t.Fatalf("writePKI: %v", err)
	}
	c := &Cluster{p: p}
	certFile, _, err := c.IssueServingCert("webhook", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := c.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("CABundle holds no certificate")
	}
	cert := readCert(t, certFile)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "192.0.2.99"}); err == nil {
		t.Error("serving certificate valid for an address it was not issued for")
	}
}

func TestRuntimeConfigDefaults(t *testing.T) {
	if _, err := (RuntimeConfig{}).withDefaults(); err == nil {
		t.Error("a runtime without state directory was accepted")
	}
	state := t.TempDir()
	for _, tc := range []struct {
		cdi, wantCDI string
		wantOutside  bool
	}{
		{cdi: "", wantCDI: filepath.Join(state, "cdi"), wantOutside: false},
		{cdi: "/var/run/cdi", wantCDI: "/var/run/cdi", wantOutside: true},
		// A sibling whose name starts like the state directory is still outside.
		{cdi: state + "-cdi", wantCDI: state + "-cdi", wantOutside: true},
	} {
		cfg, err := (RuntimeConfig{StateDir: state, BinDir: "bin", ImageDir: "images", CDISpecDir: tc.cdi}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		r := &Runtime{cfg: cfg}
		if cfg.CDISpecDir != tc.wantCDI || r.cdiOutside() != tc.wantOutside {
			t.Errorf("CDISpecDir %q: got %q outside=%t, want %q outside=%t", tc.cdi, cfg.CDISpecDir, r.cdiOutside(), tc.wantCDI, tc.wantOutside)
		}
		if !filepath.IsAbs(cfg.BinDir) || cfg.Progress == nil {
			t.Errorf("defaults not applied: %+v", cfg)
		}
		conf := containerdConfig(paths{state}, cfg.CDISpecDir)
		if !strings.Contains(conf, `cdi_spec_dirs = ["`+tc.wantCDI+`"]`) {
			t.Errorf("containerd config does not use CDI dir %s", tc.wantCDI)
		}
	}
}

func TestControlPlaneQPSArgs(t *testing.T) {
	for _, tc := range []struct {
		qps  int
		want []string
	}{
		{0, nil},
		{200, []string{"--kube-api-qps=200", "--kube-api-burst=400"}},
	} {
		c := &Cluster{cfg: Config{ControlPlaneAPIQPS: tc.qps}}
		for name, args := range map[string][]string{"kube-controller-manager": c.controllerManagerArgs(), "kube-scheduler": c.schedulerArgs()} {
			var got []string
			for _, arg := range args {
				if strings.HasPrefix(arg, "--kube-api-") {
					got = append(got, arg)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ControlPlaneAPIQPS %d: %s's rate flags %q, want %q", tc.qps, name, got, tc.want)
			}
		}
	}
}

// TestWithoutForkedChildren: a child of a listed process is left out (the
// kubelet's child between fork and exec looks like a second kubelet), an
// unrelated process is kept.
func TestWithoutForkedChildren(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	self := os.Getpid()
	if got := parentPID(child.Process.Pid); got != self {
		t.Fatalf("parentPID(child) = %d, want %d", got, self)
	}
	procs := []proc{{pid: self, role: roleKubelet}, {pid: child.Process.Pid, role: roleKubelet}}
	if got := withoutForkedChildren(procs); len(got) != 1 || got[0].pid != self {
		t.Errorf("withoutForkedChildren = %+v, want only pid %d", got, self)
	}
	if got := withoutForkedChildren(procs[1:]); len(got) != 1 {
		t.Errorf("a process whose parent is not listed was left out: %+v", got)
	}
	if len(procs) != 2 {
		t.Errorf("the argument was changed: %+v", procs)
	}
}

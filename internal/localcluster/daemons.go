// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// The command lines of the daemons.

func (c *Cluster) bin(name string) string { return filepath.Join(c.cfg.BinDir, name) }

func etcdArgs(p paths) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(EtcdClientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(EtcdPeerPort)
	return []string{
		"--name=local",
		"--data-dir=" + p.etcdData(),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--initial-cluster-state=new",
		// A throw-away test cluster: durability buys nothing and costs fsyncs.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

func (c *Cluster) apiServerArgs() []string {
	p := c.p
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(EtcdClientPort),
		"--secure-port=" + strconv.Itoa(APIServerPort),
		"--advertise-address=" + c.cfg.NodeIP,
		"--tls-cert-file=" + p.pki("apiserver.crt"),
		"--tls-private-key-file=" + p.pki("apiserver.key"),
		"--client-ca-file=" + p.pki("ca.crt"),
		"--kubelet-client-certificate=" + p.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + p.pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--requestheader-client-ca-file=" + p.pki("ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + p.pki("front-proxy-client.key"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.pki("sa.pub"),
		"--service-account-signing-key-file=" + p.pki("sa.key"),
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--profiling=false",
		"--v=" + strconv.Itoa(c.cfg.ControlPlaneVerbosity),
	}
	if c.cfg.ControlPlaneRuntimeConfig != "" {
		args = append(args, "--runtime-config="+c.cfg.ControlPlaneRuntimeConfig)
	}
	return append(args, gatesArg(c.cfg.ControlPlaneFeatureGates)...)
}

func (c *Cluster) controllerManagerArgs() []string {
	p := c.p
	kubeconfig := p.kubeconfig(userControllerManager)
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ControllerManagerPort),
		// Every controller that is on by default, the resourceclaim controller among them.
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.pki("sa.key"),
		"--root-ca-file=" + p.pki("ca.crt"),
		"--cluster-signing-cert-file=" + p.pki("ca.crt"),
		"--cluster-signing-key-file=" + p.pki("ca.key"),
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--leader-elect=false",
		"--profiling=false",
		"--v=" + strconv.Itoa(c.cfg.ControlPlaneVerbosity),
	}
	args = append(args, c.controlPlaneQPSArgs()...)
	return append(args, gatesArg(c.cfg.ControlPlaneFeatureGates)...)
}

func (c *Cluster) schedulerArgs() []string {
	kubeconfig := c.p.kubeconfig(userScheduler)
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(SchedulerPort),
		"--leader-elect=false",
		"--v=" + strconv.Itoa(c.cfg.ControlPlaneVerbosity),
	}
	args = append(args, c.controlPlaneQPSArgs()...)
	return append(args, gatesArg(c.cfg.ControlPlaneFeatureGates)...)
}

// controlPlaneQPSArgs are the client rate flags of kube-controller-manager and kube-scheduler.
func (c *Cluster) controlPlaneQPSArgs() []string {
	if c.cfg.ControlPlaneAPIQPS <= 0 {
		return nil
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(c.cfg.ControlPlaneAPIQPS), "--kube-api-burst=" + strconv.Itoa(2*c.cfg.ControlPlaneAPIQPS)}
}

func (c *Cluster) containerdArgs() []string {
	return []string{"--config=" + c.p.containerdConfig()}
}

// kubeletArgs: everything else is in the KubeletConfiguration file, feature gates included.
func (c *Cluster) kubeletArgs() []string {
	p := c.p
	args := []string{
		"--config=" + p.kubeletConfig(),
		"--kubeconfig=" + p.kubeconfig(userKubelet),
		"--root-dir=" + p.kubeletRoot(),
		"--cert-dir=" + filepath.Join(p.kubeletRoot(), "pki"),
		"--hostname-override=" + c.cfg.NodeName,
		"--node-ip=" + c.cfg.NodeIP,
		"--v=" + strconv.Itoa(c.cfg.Verbosity),
	}
	if c.cfg.KubeletVModule != "" {
		args = append(args, "--vmodule="+c.cfg.KubeletVModule)
	}
	return args
}

func gatesArg(gates map[string]bool) []string {
	if len(gates) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("--feature-gates=%s", featureGatesFlag(gates))}
}

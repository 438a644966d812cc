// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import "path/filepath"

// paths is the layout of a state directory.
type paths struct {
	state string
}

func (p paths) file(elem ...string) string {
	return filepath.Join(append([]string{p.state}, elem...)...)
}

func (p paths) stateFile() string      { return p.file("cluster.json") }
func (p paths) pki(name string) string { return p.file("pki", name) }
func (p paths) kubeconfig(user string) string {
	return p.file("kubeconfig", user+".kubeconfig")
}
func (p paths) etcdData() string           { return p.file("etcd") }
func (p paths) containerdDir() string      { return p.file("containerd") }
func (p paths) containerdConfig() string   { return p.file("containerd", "config.toml") }
func (p paths) containerdSocket() string   { return p.file("containerd", "containerd.sock") }
func (p paths) cniConfDir() string         { return p.file("cni", "net.d") }
func (p paths) cniIPAMDir() string         { return p.file("cni", "ipam") }
func (p paths) cdiDir() string             { return p.file("cdi") }
func (p paths) kubeletRoot() string        { return p.file("kubelet") }
func (p paths) kubeletConfig() string      { return p.file("config", "kubelet.yaml") }
func (p paths) podLogs() string            { return p.file("pod-logs") }
func (p paths) volumePluginDir() string    { return p.file("volume-plugins") }
func (p paths) logs() string               { return p.file("logs") }
func (p paths) log(name string) string     { return p.file("logs", name+".log") }
func (p paths) pidFile(name string) string { return p.file("pids", name+".pid") }

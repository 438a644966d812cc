// A stand-in for sigs.k8s.io/iptables-wrappers v1.0.0, which Kubernetes 1.38's kubelet requires
// and the Go module proxy reachable here refuses (its .info and .mod are served, its zip is not).
// Written in this repository; the scripts put it in a 1.38 tree's workspaces only while the real
// module cannot be downloaded (hack/tree.sh, STANDIN_MODULES; docs/versions.md).
module sigs.k8s.io/iptables-wrappers

go 1.26.0

#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make kind-image: kind node images built with nothing from a container registry (docs/kind.md).
#   dra-failfast/kind-node:FORK_VERSION        the fork kubelet
#   dra-failfast/kind-node:KUBE_VERSION-stock   the stock kubelet (for mixed clusters)
# Both come from one recipe (deploy/kind/Dockerfile) over one base image
# (dra-failfast/kind-base:bookworm): a Debian 12 root file system made with debootstrap, kind's own
# entrypoint and unit files (from the sigs.k8s.io/kind module), containerd, runc and the CNI plugins
# as the local cluster has them. The control-plane, DNS, pod-network and pause images are packed
# from binaries built here (hack/imagepack) and imported into the node's containerd at boot, under
# the names kubeadm asks for with imageRepository dra-failfast.local (deploy/kind/cluster.yaml).
# On a version whose tree needs a stand-in module (hack/tree.sh, STANDIN_MODULES: 1.38), the
# programs that need more of it (STANDIN_UNBUILDABLE: kube-proxy) are the default version's.
#
# Usage: hack/kind-image.sh [STEP...]
#   STEP: binaries rootfs images base node (default: all, in this order). Every step is cached:
#   a second run takes seconds. Output: _output/kind/.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"
cd "${REPO_ROOT}" || exit 1

ALL_STEPS=(binaries rootfs images base node)
steps=()
for arg in "$@"; do
  case "${arg}" in
    binaries | rootfs | images | base | node) steps+=("${arg}") ;;
    -h | --help)
      sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument ${arg} (steps: ${ALL_STEPS[*]})" ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || steps=("${ALL_STEPS[@]}")
mkdir -p "${KIND_BIN}" "${KIND_TOOLS_BIN}" "${KIND_IMAGES}" "${KIND_CACHE}"

# The control plane, kube-proxy and kubeadm of the node images are built here, static as upstream
# releases them (the images have no C library); the local cluster's control plane
# (hack/build-cluster-binaries.sh) is built with cgo, to share the kubelet's compile.
build_binaries() {
  local date ldflags
  local -a static=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubeadm)
  hack/build-kubelet.sh
  hack/build-kubelet.sh --stock
  hack/build-cluster-binaries.sh kube etcd containerd tools images
  if [ "${KUBE_VERSION}" = "${DEFAULT_KUBE_VERSION}" ]; then
    date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
    ldflags="-s -w $(version_ldflags "${KUBE_VERSION}" "" clean "${date}")"
    log "building ${static[*]} (${KUBE_VERSION}, static)"
    CGO_ENABLED=0 go build -trimpath -tags="${KUBE_BUILD_TAGS}" -ldflags="${ldflags}" -o "${KIND_BIN}/" \
      "${static[@]/#/k8s.io/kubernetes/cmd/}"
  else
    # Another version's, from its pristine tree.
    # shellcheck source-path=SCRIPTDIR
    source "${REPO_ROOT}/hack/tree.sh"
    with_tree_lock ensure_pristine
    local -a from_default=()
    if [ -n "$(standins "${PRISTINE_TREE}")" ]; then
      # What needs more of a stand-in than it implements comes from the default version, as
      # the version skew policy allows (kube-proxy up to three minors older than its API server).
      local program
      for program in "${STANDIN_UNBUILDABLE[@]}"; do
        static=("${static[@]/${program}/}")
        from_default+=("${program}")
      done
      read -ra static <<< "${static[*]}"
    fi
    CGO_ENABLED=0 timed "go build ${static[*]} (${KUBE_VERSION}, static)" \
      go_build_kube "${PRISTINE_TREE}" "$(stock_workspace)" "${KUBE_VERSION}" "${KIND_BIN}/" \
      "${static[@]/#/./cmd/}"
    if [ ${#from_default[@]} -gt 0 ]; then
      date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
      ldflags="-s -w $(version_ldflags "${DEFAULT_KUBE_VERSION}" "" clean "${date}")"
      log "${from_default[*]}: ${KUBE_VERSION}'s needs ${STANDIN_MODULES[*]%%=*}, which is refused here; ${DEFAULT_KUBE_VERSION}'s instead"
      CGO_ENABLED=0 timed "go build ${from_default[*]} (${DEFAULT_KUBE_VERSION}, static)" \
        go build -trimpath -tags="${KUBE_BUILD_TAGS}" -ldflags="${ldflags}" -o "${KIND_BIN}/" \
        "${from_default[@]/#/k8s.io/kubernetes/cmd/}"
    fi
  fi
  # kind_env puts KIND_BIN first on PATH: the cluster's kubectl is the one of KUBE_VERSION.
  cp "${VERSION_BIN_DIR}/kubectl" "${KIND_BIN}/kubectl"
  go build -o "${KIND_TOOLS_BIN}/" ./hack/kind/runtime-wrapper
  # kind with its own pinned dependencies, as its release is built.
  go_install_static kind "sigs.k8s.io/kind@${KIND_VERSION}"
  go_install_static coredns "github.com/coredns/coredns@${COREDNS_VERSION}"
  build_flanneld
  go_install_static flannel-cni "github.com/containernetworking/plugins/plugins/meta/flannel@${FLANNEL_CNI_VERSION}"
}

# go_install_static NAME PACKAGE@VERSION: `go install` with no cgo into KIND_TOOLS_BIN/NAME, cached
# by a stamp file.
go_install_static() {
  local name=$1 target=$2 stamp gobin
  stamp="${KIND_TOOLS_BIN}/.${name}-${target##*@}"
  [ -f "${stamp}" ] && [ -x "${KIND_TOOLS_BIN}/${name}" ] && return 0
  log "building ${target} (static)"
  gobin=$(mktemp -d)
  CGO_ENABLED=0 GOBIN="${gobin}" GOFLAGS=-buildvcs=false go install -trimpath -ldflags="-s -w" "${target}"
  mv "${gobin}"/* "${KIND_TOOLS_BIN}/${name}"
  rmdir "${gobin}"
  rm -f "${KIND_TOOLS_BIN}/.${name}-"*
  touch "${stamp}"
}

# flanneld from its module, without two backends this cluster does not use: tencentvpc (its SDK is
# not served by the module proxy) and udp (it needs cgo). host-gw is what deploy/kind uses.
build_flanneld() {
  local stamp="${KIND_TOOLS_BIN}/.flanneld-${FLANNEL_VERSION}" src dir
  [ -f "${stamp}" ] && [ -x "${KIND_TOOLS_BIN}/flanneld" ] && return 0
  log "building github.com/flannel-io/flannel@${FLANNEL_VERSION} (static, without the tencentvpc and udp backends)"
  src=$(go mod download -json "github.com/flannel-io/flannel@${FLANNEL_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "${src}" ] || die "cannot download github.com/flannel-io/flannel@${FLANNEL_VERSION}"
  dir=$(mktemp -d)
  cp -r "${src}/." "${dir}/"
  chmod -R u+w "${dir}"
  sed -i -E '/"github.com\/flannel-io\/flannel\/pkg\/backend\/(tencentvpc|udp)"/d' "${dir}/main.go"
  [ "$(grep -cE 'pkg/backend/(tencentvpc|udp)"' "${dir}/main.go")" = 0 ] || die "flannel's main.go changed: update build_flanneld"
  (cd "${dir}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "${KIND_TOOLS_BIN}/flanneld" .)
  rm -rf "${dir}"
  rm -f "${KIND_TOOLS_BIN}/.flanneld-"*
  touch "${stamp}"
}

# The images kubeadm, kind's pod network and containerd's sandbox need, as OCI tarballs, named as
# KUBE_VERSION's kubeadm asks for them with imageRepository KIND_IMAGE_REPOSITORY. The control
# plane and kube-proxy are KUBE_VERSION's; etcd, CoreDNS and pause are the same binaries on every
# version, under the tags that version's kubeadm names (hack/kind/lib.sh).
build_images() {
  local repo=${KIND_IMAGE_REPOSITORY} bin want wanted name
  wanted=$("${KIND_BIN}/kubeadm" config images list --kubernetes-version "${KUBE_VERSION}" --image-repository "${repo}" 2>/dev/null)
  kubeadm_tag() { sed -n "s#^${repo}/$1:##p" <<< "${wanted}"; }
  for name in etcd coredns pause; do
    [ -n "$(kubeadm_tag "${name}")" ] || die "kubeadm ${KUBE_VERSION} names no ${name} image: ${wanted}"
  done
  for bin in kube-apiserver kube-controller-manager kube-scheduler; do
    pack "${KIND_BIN}/${bin}" "${repo}/${bin}:${KUBE_VERSION}"
  done
  pack "${OUTPUT_DIR}/bin/etcd" "${repo}/etcd:$(kubeadm_tag etcd)"
  pack "${KIND_TOOLS_BIN}/coredns" "${repo}/coredns:$(kubeadm_tag coredns)"
  # The sandbox image of the node's containerd (the base image, shared by every version), and the
  # pause kubeadm names if it is another tag.
  for name in $(printf '%s\n' "${PAUSE_VERSION}" "$(kubeadm_tag pause)" | sort -u); do
    pack "${OUTPUT_DIR}/bin/test-workload" "${repo}/pause:${name}" --entrypoint /test-workload,--mode=pause
  done
  # kube-proxy and flanneld run iptables: a Debian layer under them (the rootfs step).
  pack "${KIND_BIN}/kube-proxy" "${repo}/kube-proxy:${KUBE_VERSION}" \
    --base-layer "${KIND_CACHE}/rootfs-iptables.tar" --links /usr/local/bin/kube-proxy \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  pack "${KIND_TOOLS_BIN}/flanneld" "${repo}/flannel:${FLANNEL_VERSION}" \
    --base-layer "${KIND_CACHE}/rootfs-iptables.tar" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  # Every name kubeadm will ask for must be there: nothing is ever pulled.
  for want in ${wanted}; do
    [ -f "${KIND_IMAGES}/$(image_file "${want}")" ] || die "no image for ${want}, which kubeadm asks for"
  done
  log "images: $(find "${KIND_IMAGES}" -maxdepth 1 -name '*.tar' -printf '%f ')($(find "${KIND_IMAGES}" -maxdepth 1 -name '*.tar' -printf '%s\n' | awk '{s += $1} END {print s}' | numfmt --to=iec))"
}

image_file() {
  local name=${1##*/}
  echo "${name/:/_}.tar"
}

# pack BINARY NAME [imagepack flags]
pack() {
  local binary=$1 name=$2
  shift 2
  "${OUTPUT_DIR}/bin/imagepack" --binary "${binary}" --name "${name}" --output "${KIND_IMAGES}/$(image_file "${name}")" "$@"
}

# The Debian mirror the host's apt uses (DEBIAN_MIRROR overrides it).
debian_mirror() {
  local uri=${DEBIAN_MIRROR:-}
  [ -n "${uri}" ] || uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "${uri}" ] || uri=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "${uri}" ] || die "no Debian mirror in the host's apt sources: set DEBIAN_MIRROR"
  echo "${uri}"
}

# debootstrap_tar NAME PACKAGE...: a minbase Debian 12 root file system with the packages, as an
# uncompressed tarball KIND_CACHE/rootfs-NAME.tar, rebuilt only when the package list changes.
debootstrap_tar() {
  local name=$1 tar="${KIND_CACHE}/rootfs-$1.tar" key dir
  shift
  key=$(echo "bookworm $*" | sha256sum | cut -c1-16)
  if [ -f "${tar}" ] && [ "$(cat "${tar}.key" 2>/dev/null)" = "${key}" ]; then
    log "rootfs ${name}: up to date"
    return 0
  fi
  command -v debootstrap > /dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap > /dev/null
  }
  dir=$(mktemp -d "${KIND_CACHE}/rootfs-${name}.XXXX")
  mkdir -p "${KIND_CACHE}/debs"
  log "debootstrap ${name}: $*"
  debootstrap --variant=minbase --include="$(IFS=,; echo "$*")" --cache-dir="${KIND_CACHE}/debs" \
    bookworm "${dir}" "$(debian_mirror)" > "${KIND_CACHE}/debootstrap-${name}.log" 2>&1 ||
    die "debootstrap failed: see ${KIND_CACHE#"${REPO_ROOT}/"}/debootstrap-${name}.log"
  # No package caches, documentation or device nodes (the runtime provides /dev).
  rm -rf "${dir:?}"/var/cache/apt/* "${dir:?}"/var/lib/apt/lists/* "${dir:?}"/usr/share/doc/* "${dir:?}"/usr/share/man/* \
    "${dir:?}"/usr/share/locale/* "${dir:?}"/dev/*
  tar --numeric-owner --sort=name --mtime=@0 --xattrs -C "${dir}" -cf "${tar}.tmp" .
  mv "${tar}.tmp" "${tar}"
  echo "${key}" > "${tar}.key"
  rm -rf "${dir}"
}

build_rootfs() {
  # kind's base image packages (kind images/base/Dockerfile), with runc and the CNI plugins
  # from Debian as the local cluster has them, and dbus for systemctl.
  debootstrap_tar node systemd dbus conntrack iptables nftables iproute2 ethtool util-linux mount kmod \
    libseccomp2 pigz fuse-overlayfs nfs-common open-iscsi e2fsprogs bash ca-certificates curl jq procps \
    runc containernetworking-plugins
  debootstrap_tar iptables iptables nftables conntrack
}

# The base image: the node rootfs with what kind's base image Dockerfile adds, done in a chroot.
build_base_image() {
  local files dir key
  files="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kind)/images/base/files"
  key=$(cat "${KIND_CACHE}/rootfs-node.tar.key" "${OUTPUT_DIR}/bin/containerd" "${KIND_TOOLS_BIN}/flannel-cni" \
    deploy/kind/node/preload-images.* hack/kind-image.sh | sha256sum | cut -c1-16)
  if docker image inspect "${KIND_BASE_IMAGE}" --format '{{index .Config.Labels "dra-failfast.key"}}' 2>/dev/null | grep -qx "${key}"; then
    log "base image ${KIND_BASE_IMAGE}: up to date"
    return 0
  fi
  dir=$(mktemp -d "${KIND_CACHE}/base.XXXX")
  tar -C "${dir}" -xf "${KIND_CACHE}/rootfs-node.tar"
  install -m 0755 "${files}"/usr/local/bin/* "${dir}/usr/local/bin/"
  cp -r "${files}/kind" "${dir}/kind"
  find "${dir}/kind" -type f -exec chmod 0644 {} + && chmod 0755 "${dir}/kind" "${dir}/kind/bin" "${dir}"/kind/bin/*
  mkdir -p "${dir}/LICENSES" "${dir}/etc/containerd" "${dir}/etc/systemd/system/kubelet.service.d"
  install -m 0644 "${files}"/LICENSES/* "${dir}/LICENSES/"
  install -m 0644 "${files}/etc/crictl.yaml" "${dir}/etc/"
  install -m 0644 "${files}"/etc/default/* "${dir}/etc/default/"
  install -m 0644 "${files}"/etc/sysctl.d/* "${dir}/etc/sysctl.d/"
  find "${files}/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "${dir}/etc/systemd/system/" \;
  install -m 0644 "${files}"/etc/systemd/system/kubelet.service.d/* "${dir}/etc/systemd/system/kubelet.service.d/"
  # kind's containerd config, two settings changed: the sandbox image is ours (kind's names the
  # upstream pause image), and restrict_oom_score_adj is on, so that containerd never asks runc for
  # an oom_score_adj below its own: lowering it needs CAP_SYS_RESOURCE, which hosts like ours do
  # not grant (runc then fails every pod with "can't get final child's PID from pipe").
  sed -e "s#^\(\s*sandbox_image = \).*#\1\"${KIND_IMAGE_REPOSITORY}/pause:${PAUSE_VERSION}\"#" \
    -e "s#^\(\s*restrict_oom_score_adj = \).*#\1true#" \
    "${files}/etc/containerd/config.toml" > "${dir}/etc/containerd/config.toml"
  grep -q "${KIND_IMAGE_REPOSITORY}/pause" "${dir}/etc/containerd/config.toml" || die "kind's containerd config has no sandbox_image line"
  grep -q "restrict_oom_score_adj = true" "${dir}/etc/containerd/config.toml" || die "kind's containerd config has no restrict_oom_score_adj line"
  install -m 0755 "${OUTPUT_DIR}/bin/containerd" "${OUTPUT_DIR}/bin/containerd-shim-runc-v2" "${OUTPUT_DIR}/bin/ctr" "${dir}/usr/local/bin/"
  "${OUTPUT_DIR}/bin/ctr" oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"} | del(.process.rlimits)' \
      > "${dir}/etc/containerd/cri-base.json"
  mkdir -p "${dir}/opt/cni/bin"
  cp "${dir}"/usr/lib/cni/* "${dir}/opt/cni/bin/"
  install -m 0755 "${KIND_TOOLS_BIN}/flannel-cni" "${dir}/opt/cni/bin/flannel"
  install -m 0755 deploy/kind/node/preload-images.sh "${dir}/kind/bin/"
  install -m 0644 deploy/kind/node/preload-images.service "${dir}/etc/systemd/system/"
  # What kind's base Dockerfile RUNs.
  find "${dir}/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "${dir}"/lib/systemd/system/multi-user.target.wants/* "${dir}"/etc/systemd/system/*.wants/* \
    "${dir}"/lib/systemd/system/local-fs.target.wants/* "${dir}"/lib/systemd/system/sockets.target.wants/*udev* \
    "${dir}"/lib/systemd/system/sockets.target.wants/*initctl* "${dir}"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> "${dir}/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "${dir}/sbin/init"
  chroot "${dir}" systemctl enable kubelet.service containerd.service undo-mount-hacks.service preload-images.service 2>/dev/null
  chroot "${dir}" systemctl mask systemd-binfmt.service 2>/dev/null
  mkdir -p "${dir}/etc/kubernetes/manifests"
  tar --numeric-owner --sort=name --mtime=@0 --xattrs -C "${dir}" -c . |
    docker import --change "LABEL dra-failfast.key=${key}" - "${KIND_BASE_IMAGE}" > /dev/null
  rm -rf "${dir}"
  log "base image ${KIND_BASE_IMAGE}: $(docker image inspect "${KIND_BASE_IMAGE}" --format '{{.Size}}' | numfmt --to=iec)"
}

# The two node images from deploy/kind/node/Dockerfile; they differ in the last layer only.
build_node_images() {
  local context="${KIND_DIR}/context" variant image kubelet
  rm -rf "${context}"
  mkdir -p "${context}/images" "${context}/manifests"
  cp deploy/kind/node/Dockerfile "${context}/"
  cp "${KIND_IMAGES}"/*.tar "${context}/images/"
  cp deploy/kind/node/manifests/*.yaml "${context}/manifests/"
  echo "${KUBE_VERSION}" > "${context}/version"
  cp "${KIND_BIN}/kubeadm" "${KIND_BIN}/kubectl" "${context}/"
  for variant in fork stock; do
    if [ "${variant}" = fork ]; then
      image=${KIND_NODE_IMAGE} kubelet="${VERSION_BIN_DIR}/kubelet"
    else
      image=${KIND_STOCK_NODE_IMAGE} kubelet="${VERSION_BIN_DIR}/kubelet-stock"
    fi
    cp "${kubelet}" "${context}/kubelet"
    DOCKER_BUILDKIT=0 docker build --network none -q --build-arg "BASE_IMAGE=${KIND_BASE_IMAGE}" -t "${image}" "${context}" > /dev/null
    log "node image ${image}: $(docker image inspect "${image}" --format '{{.Size}}' | numfmt --to=iec), kubelet $(docker run --rm --entrypoint /usr/bin/kubelet "${image}" --version)"
  done
  rm -rf "${context}"
}

total_start=$(date +%s)
# The base and node steps build into the project's container engine.
case " ${steps[*]} " in
  *" base "* | *" node "*)
    hack/kind/engine.sh start
    kind_env
    ;;
esac
for step in "${steps[@]}"; do
  case "${step}" in
    binaries) timed "binaries" build_binaries ;;
    images) timed "images" build_images ;;
    rootfs) timed "rootfs" build_rootfs ;;
    base) timed "base image" build_base_image ;;
    node) timed "node images" build_node_images ;;
  esac
done
log "kind-image steps done (${steps[*]}): $(($(date +%s) - total_start))s"

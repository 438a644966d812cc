#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make release: writes RELEASE_DIR (default ${OUTPUT_DIR}/release) with
#   kubelet          the dra-failfast kubelet (hack/build-kubelet.sh: upstream's release flags,
#                    -trimpath, version and build date taken from the patched tree's commit),
#   kubelet.sha256   its checksum (sha256sum -c kubelet.sha256),
#   patches/         the patch series, in the order it applies to upstream,
#   MANIFEST         upstream version, series version, Go version, source commits, checksum.
# Two builds from the same commit give the same binary: hack/verify-release.sh checks it.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"
cd "${REPO_ROOT}" || exit 1

release_dir=${RELEASE_DIR:-${OUTPUT_DIR}/release}
hack/build-kubelet.sh
rm -rf "${release_dir}"
mkdir -p "${release_dir}/patches"
cp "${BIN_DIR}/kubelet" "${release_dir}/kubelet"
patch_count=0
while read -r patch; do
  cp "${patch}" "${release_dir}/patches/"
  patch_count=$((patch_count + 1))
done < <(patch_files)
(cd "${release_dir}" && sha256sum kubelet > kubelet.sha256)

source_commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain 2>/dev/null)" ] || source_commit+=" (with uncommitted changes: not reproducible from the commit)"
cat > "${release_dir}/MANIFEST" <<MANIFEST
upstream: k8s.io/kubernetes ${KUBE_VERSION} (staging ${KUBE_STAGING_VERSION})
series: ${FORK_VERSION} (${patch_count} patches, series hash $(series_hash))
kubelet: $("${release_dir}/kubelet" --version), $(go env GOOS)/$(go env GOARCH)
go: $(go env GOVERSION)
source: ${source_commit}
patched tree: $(tree_git "${PATCHED_TREE}" rev-parse HEAD)
sha256: $(cut -d' ' -f1 "${release_dir}/kubelet.sha256")
MANIFEST
log "release in ${release_dir#"${REPO_ROOT}/"}:"
sed 's/^/  /' "${release_dir}/MANIFEST"

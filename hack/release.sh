#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# make release: writes RELEASE_DIR (default ${OUTPUT_DIR}/release; on another KUBE_VERSION than the
# default, ${OUTPUT_DIR}/release-<version>) with
#   kubelet          the dra-failfast kubelet (hack/build-kubelet.sh: upstream's release flags,
#                    -trimpath, version and build date taken from the patched tree's commit),
#   kubelet.sha256   its checksum (sha256sum -c kubelet.sha256),
#   patches/         the patch series, in the order it applies to upstream KUBE_VERSION (on another
#                    version than the default, as ported there: hack/tree.sh),
#   MANIFEST         upstream version, series version, Go version, source commits, checksum.
# Two builds from the same commit give the same binary: hack/verify-release.sh checks it.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/tree.sh"
cd "${REPO_ROOT}" || exit 1

release_dir=${RELEASE_DIR:-${OUTPUT_DIR}/release}
[ "${KUBE_VERSION}" = "${DEFAULT_KUBE_VERSION}" ] || release_dir=${RELEASE_DIR:-${OUTPUT_DIR}/release-${KUBE_VERSION}}
hack/build-kubelet.sh
rm -rf "${release_dir}"
mkdir -p "${release_dir}/patches"
cp "${BIN_DIR}/kubelet" "${release_dir}/kubelet"
if ${ported}; then
  # The series as it applies to this version: the commits of the patched tree (merged from the
  # default version, or ported by hand), each a patch that `git am` applies to KUBE_VERSION.
  tree_git "${PATCHED_TREE}" format-patch -q --no-signature --zero-commit -o "${release_dir}/patches" \
    "$(tree_git "${PRISTINE_TREE}" rev-parse HEAD)..HEAD"
else
  while read -r patch; do
    cp "${patch}" "${release_dir}/patches/"
  done < <(patch_files)
fi
patch_count=$(find "${release_dir}/patches" -name '*.patch' | wc -l)
[ "${patch_count}" = "$(patch_files | wc -l)" ] ||
  die "the release holds ${patch_count} patches, the series $(patch_files | wc -l)"
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

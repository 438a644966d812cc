#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# shellcheck disable=SC2034 # its variables are used by the scripts that source it
# Functions shared by the scripts that work on the upstream source tree (build-kubelet.sh,
# verify-patches.sh, test-upstream.sh, update-patches.sh). Source it; do not run it.
#
# Layout under OUTPUT_DIR/tree:
#   pristine/        k8s.io/kubernetes@KUBE_VERSION from the module cache, every staging module
#                    (KUBE_STAGING_VERSION) in staging/src/k8s.io/<name>; a git repo with one commit
#                    "upstream KUBE_VERSION", tagged upstream-KUBE_VERSION. Never edited.
#   patched/         pristine + staging-patches/*.patch, one commit per patch (git am).
#   patched.work     the Go workspace for patched/: the tree, its staging modules and this repository,
#                    so that patched code can import github.com/dra-failfast/dra-failfast/pkg/...
#                    (use it yourself with: export GOWORK=<abs path of _output/tree/patched.work>).
# The workspace file stays outside the tree so that the tree holds nothing but upstream + patches.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUTPUT_DIR=$(mkdir -p "${OUTPUT_DIR}" && cd "${OUTPUT_DIR}" && pwd)
# The default version's trees sit in _output/tree, another version's in _output/tree/<version>.
TREE_DIR="${OUTPUT_DIR}/tree"
[ "${KUBE_VERSION}" = "${DEFAULT_KUBE_VERSION}" ] || TREE_DIR+="/${KUBE_VERSION}"
PRISTINE_TREE="${TREE_DIR}/pristine"
# SERIES picks the patch series the scripts work on: "fork" (the default) is staging-patches/, the
# fork's kubelet, built with this repository in its workspace; "upstream" is upstream/patches/,
# KEP-5322 in upstream's own shape, built with nothing but the tree (upstream/README.md). The
# patched tree of each lives apart: SERIES=upstream hack/update-patches.sh exports _output/tree/<SERIES_KUBE_VERSION>/upstream.
# TREE_MAKER is the command that makes (or updates) the series' patched tree.
case "${SERIES:=fork}" in
  fork) PATCHED_TREE="${TREE_DIR}/patched" default_patches_dir=${REPO_ROOT}/staging-patches TREE_MAKER=hack/build-kubelet.sh ;;
  upstream) PATCHED_TREE="${TREE_DIR}/upstream" default_patches_dir=${REPO_ROOT}/upstream/patches TREE_MAKER="hack/upstream.sh tree" ;;
  *) die "SERIES=${SERIES}: want fork or upstream" ;;
esac
PATCHED_WORK="${PATCHED_TREE}.work"
# The number of the series' first patch: the upstream-shaped series starts with 0000, the one-line
# stand-in for master's own DefaultKubeBinaryVersion bump that is part of no pull request
# (upstream/README.md), so that 0001 is the first patch of the KEP's.
SERIES_START_NUMBER=1
[ "${SERIES}" != upstream ] || SERIES_START_NUMBER=0
PATCHES_DIR=${PATCHES_DIR:-${default_patches_dir}}
# Likewise, binaries built from another version's trees go to _output/bin/<version> (lib.sh).
BIN_DIR=${VERSION_BIN_DIR}
UPSTREAM_TAG="upstream-${KUBE_VERSION}"
# Bump when the way trees are assembled changes, to force them to be rebuilt.
TREE_FORMAT=1
# Files in a tree's .git directory that record what the tree was made from.
PRISTINE_STAMP=.git/dra-failfast-pristine
SERIES_STAMP=.git/dra-failfast-series

# Fixed identity for the commits the scripts make, so that commit hashes are reproducible.
TREE_GIT_NAME="dra-failfast build"
TREE_GIT_EMAIL="build@dra-failfast.invalid"

# with_tree_lock CMD...: runs CMD holding a lock on TREE_DIR, so that two scripts running at once do
# not assemble or replace the same tree together.
with_tree_lock() {
  mkdir -p "${TREE_DIR}"
  (
    flock 9
    "$@"
  ) 9> "${TREE_DIR}/.lock"
}

# tree_git TREE ARGS...: git in TREE with the scripts' identity, ignoring the user's and the
# system's git configuration (it may change diff output, sign commits, convert line endings...).
# No automatic gc: after the commit of a whole tree it packs in the background and deletes loose
# objects while the tree is being copied (cp: "cannot stat .git/objects/..." on a cold machine).
tree_git() {
  local tree=$1
  shift
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 \
    git -C "${tree}" -c user.name="${TREE_GIT_NAME}" -c user.email="${TREE_GIT_EMAIL}" \
    -c core.autocrlf=false -c commit.gpgsign=false -c advice.detachedHead=false -c gc.auto=0 "$@"
}

# outside_module CMD...: runs CMD in an empty directory, outside any module and workspace, so that
# `go mod download` cannot touch this repository's go.mod/go.sum.
outside_module() {
  local dir rc=0
  dir=$(mktemp -d)
  (cd "${dir}" && GOWORK=off "$@") || rc=$?
  rm -rf "${dir}"
  return "${rc}"
}

# module_dirs MODULE@VERSION...: prints "path dir" for each module, downloading them when missing.
module_dirs() {
  outside_module go mod download -json "$@" | awk -F'"' '/^\t"Path": /{path=$4} /^\t"Dir": /{print path, $4}'
}

# substitute_staging_version MODULE: prints the newest release before KUBE_STAGING_VERSION that the
# Go module proxy serves for MODULE, an upstream sample module (k8s.io/sample-*): an earlier patch
# of the same minor, or for a pre-release (v0.38.0-beta.0) a patch of the minor before it, from
# the one SUPPORTED_KUBE_VERSIONS names down. Fails for any other module, which the build may need
# at its exact version.
substitute_staging_version() {
  local mod=$1 minor patch supported
  local -a candidates=()
  [[ "${mod}" == k8s.io/sample-* ]] || return 1
  if [[ "${KUBE_STAGING_VERSION}" =~ ^(v0\.[0-9]+)\.([0-9]+)$ ]]; then
    minor=${BASH_REMATCH[1]}
    for ((patch = BASH_REMATCH[2] - 1; patch >= 0; patch--)); do candidates+=("${minor}.${patch}"); done
  elif [[ "${KUBE_STAGING_VERSION}" =~ ^v0\.([0-9]+)\.0-[a-z]+\.[0-9]+$ ]]; then
    minor=$((BASH_REMATCH[1] - 1))
    for supported in "${SUPPORTED_KUBE_VERSIONS[@]}"; do
      [[ "${supported}" =~ ^v1\.${minor}\.([0-9]+)$ ]] || continue
      for ((patch = BASH_REMATCH[1]; patch >= 0; patch--)); do candidates+=("v0.${minor}.${patch}"); done
    done
  fi
  for patch in "${candidates[@]}"; do
    if outside_module go mod download "${mod}@${patch}" > /dev/null 2>&1; then
      echo "${patch}"
      return 0
    fi
  done
  return 1
}

# patch_files: prints the patches of the series, in the order they apply.
patch_files() {
  [ -d "${PATCHES_DIR}" ] || return 0
  find "${PATCHES_DIR}" -maxdepth 1 -type f -name '*.patch' | LC_ALL=C sort
}

# The series is written against DEFAULT_KUBE_VERSION. On another version it is ported (apply_series):
# each patch is merged three ways (git am -3) against the default version's copy of the files it
# changes, so that upstream lines that differ near the patched ones do not stop it, and a patch that
# still conflicts on that minor is replaced by its hand-ported copy in PORTS_DIR/<minor>/ under the
# same name (docs/versions.md). Nothing else of the series differs between versions.
PORTS_DIR=${PORTS_DIR:-${PATCHES_DIR}/ports}
KUBE_MINOR=$(cut -d. -f1-2 <<< "${KUBE_VERSION}")
DEFAULT_PRISTINE_TREE="${OUTPUT_DIR}/tree/pristine"
ported=false
# The upstream-shaped series is written against its own version (SERIES_KUBE_VERSION, lib.sh).
[ "${KUBE_VERSION}" = "${DEFAULT_KUBE_VERSION}" ] || [ "${SERIES}" = upstream ] || ported=true

# The upstream packages the series touches, whose own unit tests must still pass in the patched tree
# (hack/test-upstream.sh) and which must compile with their tests there (hack/verify-patches.sh
# --typecheck). On a version other than the default, this repository's kubelet-side package too,
# compiled against that tree (make unit tests it against the default's).
TOUCHED_PACKAGES=(
  ./pkg/kubelet/cm/dra/...
  ./pkg/kubelet/kuberuntime/...
  ./pkg/kubelet
  ./pkg/kubelet/types
  ./pkg/kubelet/status
)
${ported} && TOUCHED_PACKAGES+=("${MODULE_PREFIX}/pkg/kubelet/cm/dra/...")

# port_of PATCH: prints the hand-ported copy of PATCH for KUBE_VERSION's minor, or PATCH itself.
port_of() {
  local patch=$1 port
  port="${PORTS_DIR}/${KUBE_MINOR}/$(basename "${patch}")"
  if ${ported} && [ -f "${port}" ]; then echo "${port}"; else echo "${patch}"; fi
}

# check_port_current PATCH: fails unless PATCH's hand port was made from PATCH as it is now: the
# port's message ends with "Ported-from: sha256:<hash of PATCH's file>" (docs/versions.md). A
# patch changed since it was ported must be ported again, or the minor would build old code.
check_port_current() {
  local patch=$1 port want have
  port=$(port_of "${patch}")
  want=$(sha256sum "${patch}" | cut -d' ' -f1)
  have=$(sed -n 's/^Ported-from: sha256:\([0-9a-f]*\)$/\1/p' "${port}" | tail -1)
  [ "${have}" = "${want}" ] ||
    die "${port#"${REPO_ROOT}/"} was ported from another version of $(basename "${patch}") (Ported-from: sha256:${have:-none}; the patch is sha256:${want} now): port the patch again (docs/versions.md)"
}

# series_hash: a hash of everything the patched tree is made from.
series_hash() {
  local p
  {
    echo "format=${TREE_FORMAT} kubernetes=${KUBE_VERSION} staging=${KUBE_STAGING_VERSION}"
    ! ${ported} || echo "ported from ${DEFAULT_KUBE_VERSION}"
    while read -r p; do
      echo "== $(basename "${p}")"
      cat "$(port_of "${p}")"
    done < <(patch_files)
  } | sha256sum | cut -d' ' -f1
}

# ensure_default_pristine: when KUBE_VERSION is not the default, makes sure the default version's
# pristine tree exists, the base of the three-way merges that port the series.
ensure_default_pristine() {
  ${ported} || return 0
  # In a shell of its own: the default version's settings are lib.sh's and this file's own.
  KUBE_VERSION=${DEFAULT_KUBE_VERSION} OUTPUT_DIR=${OUTPUT_DIR} \
    bash -c 'source "$1/hack/tree.sh" && with_tree_lock ensure_pristine' bash "${REPO_ROOT}"
}

# store_base_blobs TREE PATCH: writes into TREE's object store the default version's copy of each
# file PATCH changes, the common ancestor git am -3 looks up by the patch's "index" lines.
store_base_blobs() {
  local tree=$1 patch=$2 file
  while read -r file; do
    [ -f "${DEFAULT_PRISTINE_TREE}/${file}" ] || continue
    tree_git "${tree}" hash-object -w --no-filters "${DEFAULT_PRISTINE_TREE}/${file}" > /dev/null
  done < <(git apply --numstat "${patch}" | cut -f3)
}

# ensure_pristine: assembles PRISTINE_TREE unless it is already complete and current.
ensure_pristine() {
  local want have="" tmp kube_dir info time mod dir name
  want="format=${TREE_FORMAT} kubernetes=${KUBE_VERSION} staging=${KUBE_STAGING_VERSION}"
  [ -f "${PRISTINE_TREE}/${PRISTINE_STAMP}" ] && have=$(cat "${PRISTINE_TREE}/${PRISTINE_STAMP}")
  if [ "${have}" = "${want}" ]; then
    log "pristine tree: up to date (${PRISTINE_TREE#"${REPO_ROOT}/"})"
    return 0
  fi
  log "pristine tree: assembling k8s.io/kubernetes@${KUBE_VERSION} + staging modules @${KUBE_STAGING_VERSION}"
  mkdir -p "${TREE_DIR}"
  tmp="${PRISTINE_TREE}.tmp"
  rm -rf "${tmp}"
  kube_dir=$(outside_module kube_module_dir)
  [ -d "${kube_dir}" ] || die "cannot download k8s.io/kubernetes@${KUBE_VERSION}"
  cp -R "${kube_dir}" "${tmp}"
  chmod -R u+w "${tmp}"
  # The module zip has no staging sources: take each staging module from the module cache.
  mkdir -p "${tmp}/staging/src/k8s.io"
  local -a mods=()
  for mod in $(staging_modules "${tmp}/go.mod"); do
    mods+=("${mod}@${KUBE_STAGING_VERSION}")
  done
  [ ${#mods[@]} -gt 0 ] || die "no staging modules listed in k8s.io/kubernetes@${KUBE_VERSION}'s go.mod"
  local n=0 substituted=""
  while read -r mod dir; do
    name=${mod#k8s.io/}
    [ -d "${dir}" ] || die "module ${mod}@${KUBE_STAGING_VERSION} has no directory in the module cache"
    cp -R "${dir}" "${tmp}/staging/src/k8s.io/${name}"
    n=$((n + 1))
  done < <(module_dirs "${mods[@]}")
  # The Go module proxy does not serve every release of upstream's sample modules (none of
  # v0.37.2's sample-controller, nor v0.38.0-beta.0's). Nothing the fork builds imports them, but
  # the tree's go.work lists them: take the newest earlier release, and say so.
  for mod in "${mods[@]}"; do
    mod=${mod%@*}
    [ ! -d "${tmp}/staging/src/${mod}" ] || continue
    local version
    version=$(substitute_staging_version "${mod}") ||
      die "staging module ${mod}@${KUBE_STAGING_VERSION} cannot be downloaded, and has no substitute"
    read -r _ dir < <(module_dirs "${mod}@${version}")
    cp -R "${dir}" "${tmp}/staging/src/${mod}"
    substituted+="${mod}@${version} "
    log "pristine tree: ${mod}@${KUBE_STAGING_VERSION} is not served; using ${version} (nothing built imports it)"
    n=$((n + 1))
  done
  [ "${n}" -eq ${#mods[@]} ] || die "downloaded ${n} of ${#mods[@]} staging modules"
  chmod -R u+w "${tmp}"
  log "pristine tree: copied k8s.io/kubernetes and ${n} staging modules; committing"
  # The commit date is the module's publication date: the commit hash is the same on every machine.
  info=$(outside_module go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" |
    awk -F'"' '/^\t"Info": /{print $4}')
  time=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "${info}")
  [ -n "${time}" ] || time="2000-01-01T00:00:00Z"
  tree_git "${tmp}" init -q -b main
  # Upstream's .gitattributes asks for line-ending normalisation; the tree must stay byte-identical
  # to the module zips, so switch it off (info/attributes has the highest precedence).
  echo '* -text' > "${tmp}/.git/info/attributes"
  tree_git "${tmp}" add -A -f .
  GIT_AUTHOR_DATE="${time}" GIT_COMMITTER_DATE="${time}" \
    tree_git "${tmp}" commit -q -m "upstream ${KUBE_VERSION}" -m \
    "k8s.io/kubernetes@${KUBE_VERSION} from the Go module cache, with every staging module
at ${KUBE_STAGING_VERSION} copied into staging/src/k8s.io/<name>${substituted:+ (but ${substituted% }, which the
Go module proxy does not serve at ${KUBE_STAGING_VERSION})}. Assembled by hack/build-kubelet.sh."
  tree_git "${tmp}" tag "${UPSTREAM_TAG}"
  [ -z "$(tree_git "${tmp}" status --porcelain)" ] || die "pristine tree is not clean after its commit"
  echo "${want}" > "${tmp}/${PRISTINE_STAMP}"
  rm -rf "${PRISTINE_TREE}"
  mv "${tmp}" "${PRISTINE_TREE}"
  log "pristine tree: ready at ${PRISTINE_TREE#"${REPO_ROOT}/"} ($(tree_git "${PRISTINE_TREE}" rev-parse --short HEAD))"
}

# check_patch PATCH: fails unless PATCH is a git format-patch mail with a subject, a message body
# and a diff.
check_patch() {
  local patch=$1 name tmp subject
  name=$(basename "${patch}")
  tmp=$(mktemp -d)
  if ! git mailinfo "${tmp}/msg" "${tmp}/diff" < "${patch}" > "${tmp}/info" 2>"${tmp}/err"; then
    cat "${tmp}/err" >&2
    rm -rf "${tmp}"
    die "patch ${name}: not a git format-patch mail"
  fi
  subject=$(sed -n 's/^Subject: //p' "${tmp}/info")
  if [ -z "${subject//[[:space:]]/}" ]; then
    rm -rf "${tmp}"
    die "patch ${name}: no Subject: line (make patches with hack/update-patches.sh)"
  fi
  if ! grep -q '[^[:space:]]' "${tmp}/msg"; then
    rm -rf "${tmp}"
    die "patch ${name} (\"${subject}\"): empty message body; say why upstream's code changes"
  fi
  if ! grep -q '^diff --git ' "${tmp}/diff"; then
    rm -rf "${tmp}"
    die "patch ${name} (\"${subject}\"): no diff"
  fi
  rm -rf "${tmp}"
}

# apply_series TREE PATCH...: applies each patch in order to TREE, as one commit each. Each patch
# must first pass check_patch and `git apply --check`.
apply_series() {
  local tree=$1 patch name err how
  shift
  ensure_default_pristine
  err=$(mktemp)
  for patch in "$@"; do
    [ "$(port_of "${patch}")" = "${patch}" ] || check_port_current "${patch}"
    patch=$(port_of "${patch}")
    name=$(basename "${patch}")
    check_patch "${patch}"
    if ${ported}; then
      store_base_blobs "${tree}" "${patch}"
      if ! tree_git "${tree}" am -q -3 --committer-date-is-author-date "${patch}" >"${err}" 2>&1; then
        cat "${err}" >&2
        tree_git "${tree}" diff >&2 || true
        tree_git "${tree}" am --abort >/dev/null 2>&1 || true
        rm -f "${err}"
        die "patch ${name} does not merge into ${KUBE_VERSION} (conflicts above): port it by hand as ${PORTS_DIR#"${REPO_ROOT}/"}/${KUBE_MINOR}/${name} (docs/versions.md)"
      fi
      how="merged from ${DEFAULT_KUBE_VERSION}"
      [[ "${patch}" != "${PORTS_DIR}"/* ]] || how="ported by hand"
      log "applied ${name} (${how})"
      continue
    fi
    if ! tree_git "${tree}" apply --check "${patch}" 2>"${err}"; then
      cat "${err}" >&2
      rm -f "${err}"
      die "patch ${name} does not apply cleanly on top of the patches before it (tree: ${tree})"
    fi
    if ! tree_git "${tree}" am -q --committer-date-is-author-date "${patch}" >"${err}" 2>&1; then
      cat "${err}" >&2
      tree_git "${tree}" am --abort >/dev/null 2>&1 || true
      rm -f "${err}"
      die "patch ${name}: git am failed although git apply --check passed"
    fi
    log "applied ${name}"
  done
  rm -f "${err}"
}

# write_series_stamp TREE: records that TREE holds the current series at its current HEAD.
write_series_stamp() {
  local tree=$1
  printf '%s %s\n' "$(series_hash)" "$(tree_git "${tree}" rev-parse HEAD)" > "${tree}/${SERIES_STAMP}"
}

# ensure_patched: makes PATCHED_TREE = pristine + the series, unless it already is. Refuses to throw
# away work in the tree (uncommitted changes, or commits that are not in staging-patches/).
ensure_patched() {
  local want have="" head="" tmp
  local -a patches=()
  want=$(series_hash)
  if [ -f "${PATCHED_TREE}/${SERIES_STAMP}" ]; then
    read -r have head < "${PATCHED_TREE}/${SERIES_STAMP}"
  fi
  if [ "${have}" = "${want}" ] && [ -d "${PATCHED_TREE}/.git" ]; then
    log "patched tree: up to date (${PATCHED_TREE#"${REPO_ROOT}/"})"
    return 0
  fi
  if [ -d "${PATCHED_TREE}/.git" ]; then
    if [ -n "$(tree_git "${PATCHED_TREE}" status --porcelain)" ]; then
      die "${PATCHES_DIR#"${REPO_ROOT}/"}/ changed, but ${PATCHED_TREE} has uncommitted changes: commit them and run
SERIES=${SERIES} hack/update-patches.sh, or remove the tree to start again from ${PATCHES_DIR#"${REPO_ROOT}/"}/"
    fi
    if [ -n "${head}" ] && [ "$(tree_git "${PATCHED_TREE}" rev-parse HEAD)" != "${head}" ]; then
      die "${PATCHES_DIR#"${REPO_ROOT}/"}/ changed, but ${PATCHED_TREE} has commits that are not in ${PATCHES_DIR#"${REPO_ROOT}/"}/:
run SERIES=${SERIES} hack/update-patches.sh to export them, or remove the tree to start again from ${PATCHES_DIR#"${REPO_ROOT}/"}/"
    fi
  fi
  mapfile -t patches < <(patch_files)
  log "patched tree: applying ${#patches[@]} patch(es) from ${PATCHES_DIR#"${REPO_ROOT}/"}/"
  tmp="${PATCHED_TREE}.tmp"
  rm -rf "${tmp}"
  cp -a "${PRISTINE_TREE}" "${tmp}"
  rm -f "${tmp}/${PRISTINE_STAMP}"
  # On failure, drop the half-patched copy and leave the current tree as it was.
  (apply_series "${tmp}" "${patches[@]}") || {
    rm -rf "${tmp}"
    exit 1
  }
  write_series_stamp "${tmp}"
  rm -rf "${PATCHED_TREE}"
  mv "${tmp}" "${PATCHED_TREE}"
  log "patched tree: ready at ${PATCHED_TREE#"${REPO_ROOT}/"} ($(tree_git "${PATCHED_TREE}" rev-parse --short HEAD))"
}

# Modules a tree's go.mod requires that the Go module proxy reachable here refuses, each with this
# repository's stand-in for it (MODULE@VERSION=DIR): Kubernetes 1.38's kubelet requires
# sigs.k8s.io/iptables-wrappers v1.0.0, whose zip is refused (hack/standins/iptables-wrappers/README.md).
STANDIN_MODULES=(sigs.k8s.io/iptables-wrappers@v1.0.0=hack/standins/iptables-wrappers)
# The programs of a tree that need more of a stand-in module than it implements: not built while
# the stand-in is in use (build_binaries in hack/kind-image.sh takes them from the default
# version instead).
STANDIN_UNBUILDABLE=(kube-proxy)

# standins TREE: prints "MODULE@VERSION DIR" for each stand-in TREE needs: a module of
# STANDIN_MODULES that TREE's go.mod requires at that version and that cannot be downloaded. A
# module that downloads is used as it is: the stand-in is only for while it is refused.
standins() {
  local tree=$1 entry mod version dir
  for entry in "${STANDIN_MODULES[@]}"; do
    mod=${entry%%@*} version=${entry#*@} version=${version%%=*} dir=${entry#*=}
    grep -qE "^[[:space:]]*(require[[:space:]]+)?${mod//./\.} ${version//./\.}( |$)" "${tree}/go.mod" || continue
    if ! outside_module go mod download "${mod}@${version}" > /dev/null 2>&1; then
      echo "${mod}@${version} ${REPO_ROOT}/${dir}"
    fi
  done
}

# stock_workspace: prints the workspace that builds the pristine tree as upstream does: the
# tree's own go.work, or, when the tree needs a stand-in (standins), a copy of it outside the tree
# with the stand-in's replace (the pristine tree stays exactly upstream's).
stock_workspace() {
  if [ -z "$(standins "${PRISTINE_TREE}")" ]; then
    echo "${PRISTINE_TREE}/go.work"
    return 0
  fi
  write_workspace "${PRISTINE_TREE}" "${TREE_DIR}/pristine.work" --upstream >&2
  echo "${TREE_DIR}/pristine.work"
}

# write_workspace TREE WORKFILE [--upstream]: writes the Go workspace WORKFILE for TREE: the tree,
# its staging modules and this repository's module (--upstream: without this repository, i.e. what
# upstream's own TREE/go.work says, but outside the tree). Upstream's go.mod replaces k8s.io/X with
# ./staging/src/k8s.io/X and ours with k8s.io/X KUBE_STAGING_VERSION; a plain `go work use` of both
# fails with "conflicting replacements", version-pinned workspace replaces settle it. WORKFILE is
# only rewritten when its content changes. Go records missing checksums in WORKFILE.sum, so the
# tree's own go.work.sum is never touched.
write_workspace() {
  local tree=$1 work=$2 upstream=false dir rel_tree tmp mod line
  [ "${3:-}" != --upstream ] || upstream=true
  dir=$(dirname "${work}")
  rel_tree=$(realpath --relative-to="${dir}" "${tree}")
  tmp="${work}.new"
  {
    echo "// Generated by hack/tree.sh (write_workspace). Do not edit."
    echo
    # Same go version and godebug defaults as upstream's own workspace.
    grep -E '^(go|godebug|toolchain) ' "${tree}/go.work"
  } > "${tmp}"
  local -a edits=("-use=./${rel_tree}")
  if ! ${upstream}; then
    if ${ported}; then
      write_fork_module "${tree}" "${FORK_MODULE}"
      edits+=("-use=$(realpath --relative-to="${dir}" "${FORK_MODULE}")")
    else
      # This repository's workspace modules (go.work) too, so that its tools, tests and vet can run
      # in this workspace (fork_go); they add modules, never move one (check_workspace_versions).
      for mod in . "${LIBRARY_MODULES[@]}" "${TOOL_MODULE}" "${EXAMPLE_MODULE}"; do
        edits+=("-use=$(realpath --relative-to="${dir}" "${REPO_ROOT}/${mod}")")
      done
    fi
  fi
  for mod in $(staging_modules "${tree}/go.mod"); do
    edits+=("-use=./${rel_tree}/staging/src/${mod}")
    ${upstream} || edits+=("-replace=${mod}@${KUBE_STAGING_VERSION}=./${rel_tree}/staging/src/${mod}")
  done
  local standin standin_dir
  while read -r standin standin_dir; do
    edits+=("-replace=${standin}=$(realpath --relative-to="${dir}" "${standin_dir}")")
    log "workspace: ${standin} cannot be downloaded from the Go module proxy: using this repository's stand-in, ${standin_dir#"${REPO_ROOT}/"} (docs/versions.md)"
  done < <(standins "${tree}")
  GOWORK=off go work edit "${edits[@]}" "${tmp}"
  GOWORK=off go work edit -fmt "${tmp}"
  if cmp -s "${tmp}" "${work}"; then
    rm -f "${tmp}"
  else
    mv "${tmp}" "${work}"
    log "workspace: wrote ${work#"${REPO_ROOT}/"}"
  fi
  # Start from upstream's checksums of workspace-only dependencies.
  if [ ! -f "${work}.sum" ] && [ -f "${tree}/go.work.sum" ]; then
    cp "${tree}/go.work.sum" "${work}.sum"
  fi
  # Sanity: the workspace must resolve k8s.io/kubernetes and k8s.io/api to the tree itself.
  for line in k8s.io/kubernetes k8s.io/api; do
    mod=$(cd "${tree}" && GOWORK="${work}" go list -m -f '{{.Dir}}' "${line}")
    [ "$(realpath "${mod}")" = "$(realpath "${tree}")" ] ||
      [ "$(realpath "${mod}")" = "$(realpath "${tree}/staging/src/${line}")" ] ||
      die "workspace ${work}: ${line} resolves to ${mod}, not to the tree"
  done
}

# On a ported version the patched tree's workspace holds, instead of this repository's module (which
# requires the default version's k8s.io/* and would move the tree's dependencies), FORK_MODULE: a
# copy of the packages the series imports, as one module that requires nothing, so that every
# dependency is the tree's own.
FORK_MODULE="${TREE_DIR}/fork-module"
# The directories of this repository that FORK_MODULE holds: the series imports the first two.
FORK_MODULE_PACKAGES=(pkg/kubelet/cm/dra api/draplugin/v1alpha api/decision)

# write_fork_module TREE DIR: (re)writes DIR as FORK_MODULE for TREE, with TREE's Go version.
write_fork_module() {
  local tree=$1 dir=$2 pkg go_version
  go_version=$(awk '$1 == "go" {print $2; exit}' "${tree}/go.work")
  rm -rf "${dir}.new"
  mkdir -p "${dir}.new"
  for pkg in "${FORK_MODULE_PACKAGES[@]}"; do
    mkdir -p "${dir}.new/$(dirname "${pkg}")"
    cp -R "${REPO_ROOT}/${pkg}" "${dir}.new/${pkg}"
  done
  printf '// Generated by hack/tree.sh (write_fork_module) from this repository. Do not edit.\nmodule %s\n\ngo %s\n' \
    "${MODULE_PREFIX}" "${go_version}" > "${dir}.new/go.mod"
  if [ -d "${dir}" ] && diff -r -q "${dir}" "${dir}.new" > /dev/null; then
    rm -rf "${dir}.new"
  else
    rm -rf "${dir}"
    mv "${dir}.new" "${dir}"
    log "fork module: copied ${FORK_MODULE_PACKAGES[*]} to ${dir#"${REPO_ROOT}/"} (go ${go_version})"
  fi
}

# check_workspace_versions TREE WORKFILE: fails when adding this repository to the workspace
# changes the version of any dependency upstream's own workspace selects: the patched kubelet must
# be built from exactly upstream's dependencies. Upstream's workspace is regenerated beside
# WORKFILE (as WORKFILE minus .work plus .upstream.work) because `go list -m all` in the tree's own
# go.work would add checksums to the tree's go.work.sum.
check_workspace_versions() {
  local tree=$1 work=$2 upstream_work tmp key
  upstream_work="${work%.work}.upstream.work"
  # Skip when nothing it depends on changed since it last passed.
  # The library modules' requirements take part in the workspace's versions too.
  local -a library_gomods=("${LIBRARY_MODULES[@]/%//go.mod}")
  key=$(cat "${REPO_ROOT}/go.mod" "${library_gomods[@]/#/${REPO_ROOT}/}" "${work}" "${tree}/go.mod" "${tree}/go.work" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "${work}.versions-ok" 2>/dev/null)" = "${key}" ]; then
    log "workspace: dependency versions match upstream's (unchanged since last check)"
    return 0
  fi
  write_workspace "${tree}" "${upstream_work}" --upstream
  tmp=$(mktemp -d)
  (cd "${tree}" && GOWORK="${upstream_work}" go list -m -f '{{.Path}} {{.Version}}' all) |
    LC_ALL=C sort > "${tmp}/upstream"
  (cd "${tree}" && GOWORK="${work}" go list -m -f '{{.Path}} {{.Version}}' all) |
    LC_ALL=C sort > "${tmp}/ours"
  # Keep modules both workspaces know: ours may list extra modules needed only by this repository.
  LC_ALL=C join "${tmp}/upstream" "${tmp}/ours" |
    awk '$2 != $3 {print "  " $1 ": upstream " $2 ", with this repository " $3}' > "${tmp}/diff"
  if [ -s "${tmp}/diff" ]; then
    cat "${tmp}/diff" >&2
    rm -rf "${tmp}"
    die "this repository's go.mod changes dependency versions of the patched tree (see above); align go.mod with k8s.io/kubernetes@${KUBE_VERSION}"
  fi
  log "workspace: dependency versions match upstream's ($(wc -l < "${tmp}/upstream") modules; $(LC_ALL=C join -v2 "${tmp}/upstream" "${tmp}/ours" | wc -l) extra from this repository)"
  rm -rf "${tmp}"
  echo "${key}" > "${work}.versions-ok"
}

# kube_ldflags TREE VERSION: version_ldflags (lib.sh) for a build of TREE reporting VERSION. The
# commit is TREE's HEAD; the build date is HEAD's commit date (or SOURCE_DATE_EPOCH), so that an
# unchanged tree links to an identical binary.
kube_ldflags() {
  local tree=$1 version=$2 commit state date
  commit=$(tree_git "${tree}" rev-parse HEAD)
  state=clean
  [ -z "$(tree_git "${tree}" status --porcelain)" ] || state=dirty
  if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    date=$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)
  else
    date=$(TZ=UTC tree_git "${tree}" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
  fi
  version_ldflags "${version}" "${commit}" "${state}" "${date}"
}

# prepare_fork_workspace: the default version's patched tree and its workspace, up to date.
prepare_fork_workspace() {
  with_tree_lock ensure_pristine
  with_tree_lock ensure_patched
  with_tree_lock write_workspace "${PATCHED_TREE}" "${PATCHED_WORK}"
}

# fork_go ARG...: the go command on this repository's modules in the patched tree's workspace
# (prepare_fork_workspace) with the kubelet's flags (-trimpath, KUBE_BUILD_TAGS; a -tags on the
# command line replaces them, so name them there too). go vet, the tools and the e2e tests then
# reuse the kubelet's compile of every package they share with it (k8s.io/* and most third-party
# modules: identical sources, module identities and flags) instead of compiling that graph a second
# time from the module cache: about 330 s of make test from cold (docs/building.md).
fork_go() {
  GOWORK="${PATCHED_WORK}" GOFLAGS="${GOFLAGS:+${GOFLAGS} }-trimpath -tags=${KUBE_BUILD_TAGS}" go "$@"
}

# go_build_kube TREE WORKFILE VERSION OUT PKG...: builds PKG in TREE like upstream's release builds
# (hack/lib/golang.sh: -trimpath, -s -w, tags selinux,notest,grpcnotrace; DBG=1 keeps symbols and
# disables optimisations; KUBE_BUILD_RACE=1 adds the race detector). -trimpath also keeps the
# build cache independent of the tree's location.
# OUT may be /dev/null.
go_build_kube() {
  local tree=$1 work=$2 version=$3 out=$4
  shift 4
  local ldflags tags=${KUBE_BUILD_TAGS}
  local -a flags=()
  ldflags="all=$(kube_ldflags "${tree}" "${version}")"
  if [ "${KUBE_BUILD_RACE:-}" = 1 ]; then
    flags+=(-race)
  fi
  if [ "${DBG:-}" = 1 ]; then
    flags+=(-gcflags="all=-N -l")
    tags=${tags/,grpcnotrace/}
  else
    ldflags+=" -s -w"
    flags+=(-trimpath)
  fi
  (cd "${tree}" && GOWORK="${work}" go build "${flags[@]}" -tags="${tags}" -ldflags="${ldflags}" -o "${out}" "$@")
}

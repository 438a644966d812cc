#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Regenerates the Go code of api/ from its .proto files with Debian's protoc and a pinned
# protoc-gen-go. With an argument, writes the generated tree below that directory instead
# (hack/verify-codegen.sh uses this).
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}" || exit 1

# Same generator version as upstream's k8s.io/kubelet DRA bindings.
PROTOC_GEN_GO_VERSION=v1.36.11
out_root=${1:-${REPO_ROOT}}

if ! command -v protoc >/dev/null; then
  log "installing protoc (Debian protobuf-compiler)"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
fi
tools="${OUTPUT_DIR}/tools"
if [ ! -x "${tools}/protoc-gen-go-${PROTOC_GEN_GO_VERSION}" ]; then
  log "building protoc-gen-go ${PROTOC_GEN_GO_VERSION}"
  GOBIN="${tools}" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
  mv "${tools}/protoc-gen-go" "${tools}/protoc-gen-go-${PROTOC_GEN_GO_VERSION}"
fi

# Each file is compiled from a scratch include root where it sits at its Go import path
# (github.com/dra-failfast/dra-failfast/api/...): that path is the name the generated code
# registers it under in protobuf's global registry, unique to this module. Compiled from its own
# directory it would register as a bare "api.proto", and any other bare api.proto linked into the
# same driver binary would make it panic at init.
include=$(mktemp -d)
trap 'rm -rf "${include}"' EXIT
for proto in $(find api -name '*.proto' | sort); do
  dir=$(dirname "${proto}")
  import_path="${MODULE_PREFIX}/${proto}"
  mkdir -p "${include}/$(dirname "${import_path}")" "${include}/out" "${out_root}/${dir}"
  cp "${proto}" "${include}/${import_path}"
  (cd "${include}" && protoc --plugin=protoc-gen-go="${tools}/protoc-gen-go-${PROTOC_GEN_GO_VERSION}" \
    --proto_path=. --go_out=out --go_opt=paths=source_relative "${import_path}")
  mv "${include}/out/${import_path%.proto}.pb.go" "${out_root}/${dir}/"
  log "generated ${dir}/$(basename "${proto}" .proto).pb.go (registered as ${import_path})"
done

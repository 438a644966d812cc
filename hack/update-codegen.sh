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

for proto in $(find api -name '*.proto' | sort); do
  dir=$(dirname "${proto}")
  mkdir -p "${out_root}/${dir}"
  protoc --plugin=protoc-gen-go="${tools}/protoc-gen-go-${PROTOC_GEN_GO_VERSION}" \
    --proto_path="${dir}" --go_out="${out_root}/${dir}" --go_opt=paths=source_relative \
    "${proto}"
  log "generated ${dir}/$(basename "${proto}" .proto).pb.go"
done

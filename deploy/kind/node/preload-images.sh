#!/bin/sh
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Imports every image tarball under /kind/images into containerd (k8s.io namespace). Importing an
# image that is already there is cheap, so this runs at every boot.
set -eu
for image in /kind/images/*.tar; do
  ctr --namespace k8s.io images import --local "${image}" > /dev/null
done
echo "imported $(ls /kind/images/*.tar | wc -l) images"

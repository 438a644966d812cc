# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# Thin entry points: every target calls one script in hack/, which documents itself.
# PKGS: packages for test-upstream (default: the kubelet packages the fork touches).
# BENCH_MODE: the mode of bench, full by default (hack/bench.sh lists the modes).
.PHONY: demo test test-versions unit e2e verify bench build kubelet kubelet-stock release verify-release kind-image \
	kind-up kind-down kind-demo test-kind test-real-driver \
	verify-patches verify-upstream test-extra verify-adoption release-library test-upstream test-upstream-e2e test-series update-patches test-e2e-race

# The two commands of the README.
demo:
	hack/demo.sh $(ARGS)

test:
	hack/test.sh

# The developer loop: parts of make test.
unit:
	hack/test.sh unit

e2e:
	hack/test.sh build e2e

verify:
	hack/verify.sh

# The upstream-shaped KEP-5322 series (upstream/README.md).
verify-upstream:
	hack/upstream.sh verify

bench:
	BENCH_MODE="$(BENCH_MODE)" hack/bench.sh

build:
	hack/build.sh

kubelet:
	hack/build-kubelet.sh

kubelet-stock:
	hack/build-kubelet.sh --stock

release:
	hack/release.sh

verify-release:
	hack/verify-release.sh

# kind: node images built with nothing from a registry, a three-node cluster, the demo there.
kind-image:
	hack/kind-image.sh

kind-up:
	hack/kind-up.sh

kind-down:
	hack/kind-down.sh

kind-demo:
	hack/kind-demo.sh

test-kind:
	hack/test-kind.sh

# Drivers written elsewhere (dra-example-driver, dra-driver-google-tpu) with their own suites on this
# project's kind nodes (docs/real-driver.md); DRIVER=NAME runs one.
test-real-driver:
	hack/test-real-driver.sh $(if $(DRIVER),--driver $(DRIVER))

verify-patches:
	hack/verify-patches.sh

# Outside modules adopt the driver library by its release tag, with no replace (a scratch release).
verify-adoption:
	hack/verify-adoption.sh

# Tags the library modules at HEAD for the release (api/v0.N.0, pkg/failfastplugin/v0.N.0).
release-library:
	hack/release-library.sh --tag

test-upstream:
	hack/test-upstream.sh $(PKGS)

# Every supported Kubernetes version: the series ported and built, its unit tests there
# (docs/versions.md).
test-versions:
	hack/test-versions.sh

# Upstream's DRA node e2e suite against stock, the fork and the series' kubelet, each with the gate
# off and on, in systemd nodes (about two and a half hours).
test-upstream-e2e:
	hack/test-upstream-e2e.sh

# The upstream-shaped series' kubelet through this repository's e2e_node suite and the benchmark's
# failing path, beside the fork's (about 25 minutes).
test-series:
	hack/test-series.sh

# The stages make test leaves out for its 60-minute budget (docs/building.md): the library adopted
# by tag from outside modules, upstream's DRA node e2e specs that prepare and unprepare claims
# (fork, gate on, this host), the benchmark's smoke run and the kind smoke run.
test-extra:
	hack/test.sh adoption upstream-e2e bench kind

update-patches:
	hack/update-patches.sh

test-e2e-race:
	hack/test-e2e-race.sh

# Thin entry points: every target calls one script in hack/, which documents itself.
# PKGS: packages for test-upstream (default: the kubelet packages the fork touches).
.PHONY: demo test bench build kubelet kubelet-stock verify verify-patches test-upstream update-patches test-e2e-race

demo:
	hack/demo.sh $(ARGS)

test:
	hack/test.sh

# BENCH_MODE=full (default, about an hour) or smoke (a few minutes).
bench:
	BENCH_MODE="$(BENCH_MODE)" hack/bench.sh

build:
	hack/build.sh

kubelet:
	hack/build-kubelet.sh

kubelet-stock:
	hack/build-kubelet.sh --stock

verify:
	hack/verify-gomod.sh && hack/verify-codegen.sh && hack/verify-patches.sh

verify-patches:
	hack/verify-patches.sh

test-upstream:
	hack/test-upstream.sh $(PKGS)

update-patches:
	hack/update-patches.sh

test-e2e-race:
	hack/test-e2e-race.sh

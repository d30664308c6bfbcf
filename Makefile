SHELL := /bin/bash
.PHONY: test tools lint core-purity demo demo-check deploy-check crds bench

# Build or reuse the test tools (kube-apiserver + etcd, kubectl, cue, Flux source CRDs).
tools:
	./tools/install

# Every suite. Tests find the tools through the OPM_* variables `tools/install --env` prints.
test: tools
	eval "$$(./tools/install --env)" && cargo test --workspace --locked

# The README's first command: a local API server, a CUE registry, an artifact server, the
# operator and both example releases; Ctrl-C stops everything.
demo:
	./hack/demo

# The demo non-interactively: exits 0 once both example releases are Ready.
demo-check:
	./hack/demo --once

# deploy/ against a real API server: server dry-run, apply, kubectl explain, printer
# columns, RBAC can-i checks.
deploy-check:
	./hack/check-deploy

# Regenerate deploy/crds and the Helm chart's CRDs from the Rust API types.
crds:
	UPDATE_CRDS=1 cargo test -p opm-core --test deploy_crds -- --ignored

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

core-purity:
	./tools/check-core-deps

# Side by side with Flux kustomize-controller (builds it from its Go module once, then
# 100 and 1000 releases at concurrency 4 and 10; long). Table: bench/results/results.md.
# Options: ./bench/run --help (e.g. BENCH_ARGS="--releases 100 --concurrency 4").
bench:
	./bench/run $(BENCH_ARGS)

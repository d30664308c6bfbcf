SHELL := /bin/bash
.PHONY: test chaos fuzz bench tools lint core-purity demo demo-check deploy-check crds image image-check docs docs-gen

# Build or reuse the test tools (kube-apiserver + etcd, kubectl, cue, Flux source CRDs).
tools:
	./tools/install

# Where the operator e2e tests leave their attempt traces for `opm-sim replay`.
E2E_TRACES := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/e2e-traces

# Every suite. Tests find the tools through the OPM_* variables `tools/install --env` prints.
# Then every trace the e2e tests recorded must replay identically through the core.
test: tools
	rm -rf "$(E2E_TRACES)"
	eval "$$(./tools/install --env)" && OPM_E2E_TRACE_DIR="$(E2E_TRACES)" cargo test --workspace --locked
	cargo run --locked -q -p opm-sim -- replay "$(E2E_TRACES)"

# Chaos on a real API server of its own: kube-apiserver and operator SIGKILLed mid-apply and
# mid-prune, artifact server faults, cue past its deadline; prints the table and writes
# $CARGO_TARGET_DIR/chaos-report.md (target/ by default). `make test` runs it too.
chaos: tools
	eval "$$(./tools/install --env)" && cargo test -p opm-operator --test chaos --locked -- --nocapture

# The README's first command: a local API server, a CUE registry, an artifact server, the
# operator, the Platform, the OPM example release and both plain ones; Ctrl-C stops everything.
demo:
	./hack/demo

# The demo non-interactively: exits 0 once the Platform and all three example releases are Ready.
demo-check:
	./hack/demo --once

# deploy/ against a real API server: server dry-run, apply, kubectl explain, printer
# columns, RBAC can-i checks.
deploy-check:
	./hack/check-deploy

# The image, offline: release binaries built here, deploy/Dockerfile (FROM scratch) built
# with buildah; writes target/image/opm-operator-<version>.tar (OCI archive) and its SPDX
# SBOM, prints the size. Needs buildah (apt-get install buildah).
image:
	./hack/image

# The image under podman as the Deployment runs it, against the test API server: the file
# list, the binaries' digests, /readyz, the demo's releases Ready, --version, podman diff.
# Needs podman and runc (apt-get install podman runc).
image-check: image
	./hack/image-check

# Regenerate deploy/crds and the Helm chart's CRDs from the Rust API types.
crds:
	UPDATE_CRDS=1 cargo test -p opm-core --test deploy_crds -- --ignored

# The book (docs/): installs a pinned mdBook once into ~/.cache/opm-operator, builds
# docs/book. The tests check its links and generated pages; CI does not build it.
docs:
	./hack/docs

# Regenerate the book's generated pages: the CRDs first, then the per-kind reference, the
# reasons list and the two command references (from --help).
docs-gen: crds
	UPDATE_DOCS=1 cargo test --locked -p opm-core --test docs
	UPDATE_DOCS=1 cargo test --locked -p opm-operator --test docs_help
	UPDATE_DOCS=1 cargo test --locked -p kubectl-opm --test docs_help

lint:
	cargo fmt --all -- --check
	./tools/check-module-cycles
	cargo clippy --workspace --all-targets --locked -- -D warnings

core-purity:
	./tools/check-core-deps

# The long reliability runs (CI runs them): a million generated archives through the extractor, a
# million generated values through the value→objects conversion, a hundred thousand whole attempts
# from generated spec values (1-2 minutes in a debug build), and ten thousand random
# fault schedules in the simulated world (a release build), and a hundred thousand generated
# health expressions over generated objects (a release build, as the operator runs them:
# the debug build is ~10x slower). Each prints its figures.
fuzz:
	OPM_FUZZ_CASES=1000000 cargo test --locked -p opm-operator --test fuzz_extract -- --nocapture
	OPM_FUZZ_CASES=1000000 cargo test --locked -p opm-core --test fuzz_render_value -- --nocapture
	OPM_FUZZ_CASES=100000 cargo test --locked -p opm-core --test fuzz_spec -- --nocapture
	OPM_FUZZ_CASES=100000 cargo test --release --locked -p opm-core --test fuzz_health_cel -- --nocapture
	cargo bench --locked -p opm-world --bench fault_schedules

# Side by side with Flux kustomize-controller (builds it from its Go module once, then
# 100 and 1000 releases at concurrency 4 and 10, in three tables: as shipped, tuned, and
# converge to healthy; long). Tables: bench/results/results.md.
# Options: ./bench/run --help (e.g. BENCH_ARGS="--releases 100 --concurrency 4"; OPM against
# plain: BENCH_ARGS="--tables opm --releases 1000 --concurrency 4").
bench:
	./bench/run $(BENCH_ARGS)

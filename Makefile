SHELL := /bin/bash
.PHONY: test tools lint core-purity

# Build or reuse the test tools (kube-apiserver + etcd, kubectl, cue, Flux source CRDs).
tools:
	./tools/install

# Every suite. Tests find the tools through the OPM_* variables `tools/install --env` prints.
test: tools
	eval "$$(./tools/install --env)" && cargo test --workspace --locked

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

core-purity:
	./tools/check-core-deps

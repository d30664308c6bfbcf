.PHONY: test tools lint
tools:
	./tools/install
test:
	cargo test --workspace
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

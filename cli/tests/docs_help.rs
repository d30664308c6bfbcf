//! `kubectl opm --help` and every subcommand's help are user text: they must not point at
//! internal documents or issues, and the book's command reference is generated from them
//! (`docs/src/reference/kubectl-opm.md`; regenerate with `make docs-gen`).

#[path = "../../tests/support/doc_lint.rs"]
mod doc_lint;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-opm");
const PAGE: &str = "docs/src/reference/kubectl-opm.md";

fn page() -> String {
    doc_lint::help_page(
        BIN,
        "kubectl opm",
        "kubectl opm",
        "The `kubectl` plugin for day-2 work on releases: install the `kubectl-opm` binary \
         anywhere on your `PATH` and `kubectl` finds it. Each section below is the command's \
         own `--help`.",
    )
}

#[test]
fn help_has_no_internal_references() {
    let page = page();
    assert!(
        doc_lint::subcommands(&doc_lint::help_text(BIN, &[])).len() >= 8,
        "kubectl opm lists its subcommands"
    );
    let findings: Vec<String> = doc_lint::forbidden_refs("kubectl opm --help", &page)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

#[test]
fn the_reference_page_matches_the_help() {
    let root = doc_lint::repo_root();
    doc_lint::check_generated(&root, PAGE, &page()).unwrap();
}

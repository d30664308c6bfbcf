//! `opm-operator --help` and every subcommand's help are user text: they must not point at
//! internal documents or issues, and the book's command reference is generated from them
//! (`docs/src/reference/opm-operator.md`; regenerate with `make docs-gen`).

#[path = "../../tests/support/doc_lint.rs"]
mod doc_lint;

const BIN: &str = env!("CARGO_BIN_EXE_opm-operator");
const PAGE: &str = "docs/src/reference/opm-operator.md";

fn page() -> String {
    doc_lint::help_page(
        BIN,
        "opm-operator",
        "opm-operator",
        "The operator binary: `run` is what the Deployment starts (its flags are the operator's \
         configuration), `render` previews what a release would apply without a cluster, \
         `crds` prints the CustomResourceDefinitions. Each section below is the command's own \
         `--help`.",
    )
}

#[test]
fn help_has_no_internal_references() {
    let page = page();
    assert!(
        doc_lint::subcommands(&doc_lint::help_text(BIN, &[])).len() >= 3,
        "opm-operator lists run, render and crds"
    );
    let findings: Vec<String> = doc_lint::forbidden_refs("opm-operator --help", &page)
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

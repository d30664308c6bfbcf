use super::*;

#[test]
fn deps_of_cues_own_module_file() {
    let text = r#"module: "opm.internal/probe@v0"
language: {
	version: "v0.17.0"
}
deps: {
	"example.com/opm/web@v1": {
		v: "v1.0.0"
	}
	"opmodel.dev/core@v2": {
		v: "v2.0.0-test.1"
	}
}
"#;
    let deps = module_deps(text);
    assert_eq!(deps.len(), 2);
    assert_eq!(deps["opmodel.dev/core@v2"], "v2.0.0-test.1");
    assert_eq!(
        opm_core::opm::flavour(deps.keys().map(String::as_str)),
        Flavour::Opm
    );
    let compact = "module: \"a@v0\"\ndeps: \"opmodel.dev/core@v0\": v: \"v0.4.0\"\n";
    assert_eq!(module_deps(compact)["opmodel.dev/core@v0"], "v0.4.0");
    assert!(module_deps("module: \"a@v0\"\n").is_empty());
}

#[test]
fn the_platform_package_pins_and_strips_the_v() {
    let n = Normalised {
        type_: "kubernetes".into(),
        catalogs: vec![opm_core::opm::platform::Catalog {
            path: "opmodel.dev/catalogs/opm@v2".into(),
            version: "v2.0.0-test.2".into(),
        }],
    };
    let p = layout::platform_file(&n);
    assert!(
        p.contains("catalog0 \"opmodel.dev/catalogs/opm@v2\""),
        "{p}"
    );
    assert!(p.contains("version:  \"2.0.0-test.2\""), "{p}");
    assert!(p.contains("type: \"kubernetes\""), "{p}");
    let f = layout::platform_files(&n).unwrap();
    assert!(
        f.files[0]
            .1
            .contains("\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0-test.2\"")
    );
    assert_eq!(
        layout::package_name("// x\npackage web_demo\n"),
        Some("web_demo".into())
    );
    assert_eq!(layout::quote("é\""), "\"\\u00e9\\\"\"");
}

//! `opm-operator crds`: the three CustomResourceDefinitions (ModuleRelease, Release,
//! Platform) as YAML, from the core's types.

/// The CRDs as a multi-document YAML stream.
pub fn yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in opm_core::api::crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_crd_is_printed() {
        let y = super::yaml().unwrap();
        assert!(y.contains("name: modulereleases.releases.opmodel.dev"));
        assert!(y.contains("name: releases.releases.opmodel.dev"));
        assert!(y.contains("name: platforms.releases.opmodel.dev"));
        assert_eq!(y.matches("---\n").count(), 3);
    }
}

//! `Ctx::from_object` clamps what a release stores to SPEC §24's bounds.

use super::*;
use crate::api::{ModuleRelease, ModuleReleaseSpec};

fn ctx_with(interval: Option<&str>, timeout: Option<&str>) -> Ctx {
    let mut mr = ModuleRelease {
        metadata: Default::default(),
        spec: ModuleReleaseSpec::default(),
        status: None,
    };
    mr.metadata.name = Some("web".into());
    mr.metadata.namespace = Some("demo".into());
    mr.spec.common.interval = interval.map(str::to_string);
    mr.spec.common.timeout = timeout.map(str::to_string);
    let obj = ReleaseObject::ModuleRelease(mr);
    Ctx::from_object(obj.key(), obj)
}

#[test]
fn interval_and_timeout_are_clamped_to_spec_bounds_whatever_was_stored() {
    // What an older CRD let through: the issue 13 crash value and its neighbours.
    for huge in [
        "5124095576030431h",
        "25h",
        "2562047h47m16.854775807s",
        "86400.001s",
    ] {
        let c = ctx_with(Some(huge), Some(huge));
        assert_eq!(c.interval, MAX_INTERVAL, "{huge}");
        assert_eq!(c.timeout, MAX_TIMEOUT, "{huge}");
    }
    // Unparseable or zero: the defaults; below the minimum: 10s.
    let c = ctx_with(Some("99999999999999999999999h"), Some("0"));
    assert_eq!((c.interval, c.timeout), (DEFAULT_INTERVAL, DEFAULT_TIMEOUT));
    let c = ctx_with(Some("1ns"), Some("1ns"));
    assert_eq!(c.interval, MIN_INTERVAL);
    assert_eq!(c.timeout, Duration::from_nanos(1));
    let c = ctx_with(Some("24h"), Some("1h30m"));
    assert_eq!(
        (c.interval, c.timeout),
        (MAX_INTERVAL, Duration::from_secs(5400))
    );
}

use super::*;
use std::time::Duration;

#[test]
fn error_classes_survive_the_translation() {
    let e = fetch_error(ArtifactError::Fetch(FetchError::HttpStatus {
        url: "u".into(),
        status: 503,
    }));
    assert_eq!(e, CoreFetch::Http { status: 503 });
    let e = fetch_error(ArtifactError::Extract(ExtractError::HardLink {
        name: "x".into(),
    }));
    assert!(matches!(e, CoreFetch::InvalidArtifact { .. }));
    let e = render_error(RenderError::Timeout {
        after: Duration::from_secs(1),
    });
    assert!(matches!(e, CoreRender::Timeout { .. }));
    let e = render_error(RenderError::Resolution {
        message: "module not found".into(),
    });
    assert!(matches!(e, CoreRender::Resolution { .. }));
}

//! Batching against a fake `cue`: a batch that overruns its deadline falls back to single
//! runs within every member's own bound, and the batch deadline follows the members'.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::batch::{Member, Reply, batch_timeout};
use super::tests::fake_cue;
use super::*;

/// Shut until opened, so every render joins its batch before any turn is given.
struct ShutGate(Arc<Semaphore>);

impl RenderGate for ShutGate {
    type Turn = OwnedSemaphorePermit;

    async fn turn(&self, _namespace: &str) -> OwnedSemaphorePermit {
        self.0.clone().acquire_owned().await.unwrap()
    }
}

/// Release `i` of one namespace: a batch holds one namespace's releases.
fn identity(i: usize) -> ReleaseIdentity {
    ReleaseIdentity {
        name: format!("r-{i}"),
        namespace: "ns".into(),
    }
}

#[tokio::test]
async fn a_batch_past_its_deadline_falls_back_to_single_runs_in_time() {
    let dir = tempfile::tempdir().unwrap();
    // A batch package (two or more fields) hangs; a single release exports at once.
    let script = "if [ \"$1\" = version ]; then echo 'cue version v0.0.0-fake'; exit 0; fi\n\
                  if grep -q '^r1: ' release.cue; then sleep 30; fi\n\
                  echo '{\"kind\":\"ModuleRelease\",\"components\":{}}'";
    let r = Renderer::new(RenderConfig::new(fake_cue(dir.path(), script)));
    let module = ModuleRef::new("example.com/m@v0", "v0.1.0", None).unwrap();
    let gate = ShutGate(Arc::new(Semaphore::new(0)));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(4);
    let ids: Vec<_> = (0..3).map(identity).collect();
    let values = json!({});
    let renders = ids
        .iter()
        .map(|id| r.render_module_fair(&module, &values, id, None, &gate, deadline));
    let open = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        gate.0.add_permits(2);
    };
    let (out, ()) = tokio::join!(futures::future::join_all(renders), open);
    for res in out {
        res.expect("each renders alone after the batch overran");
    }
    let s = r.stats();
    assert_eq!((s.runs.load(Relaxed), s.batch_runs.load(Relaxed)), (4, 1));
    assert_eq!(s.batch_fallbacks.load(Relaxed), 1);
    // The batch had half of the members' remaining ~3.9 s: it was killed near 2 s, and
    // each member still rendered before its own deadline.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[test]
fn a_batch_deadline_is_half_the_shortest_time_left_at_most_a_quarter_of_the_render_timeout() {
    let now = Instant::now();
    let member = |left: Duration| {
        let (reply, _) = tokio::sync::oneshot::channel::<Reply>();
        Member {
            values: json!({}),
            identity: identity(0),
            deadline: now + left,
            reply,
            sealed: None,
        }
    };
    let timeout = Duration::from_secs(60);
    let members = [
        member(Duration::from_secs(300)),
        member(Duration::from_secs(20)),
    ];
    assert_eq!(
        batch_timeout(timeout, &members, now),
        Duration::from_secs(10)
    );
    let long = [member(Duration::from_secs(300))];
    assert_eq!(batch_timeout(timeout, &long, now), Duration::from_secs(15));
    let gone = [member(Duration::ZERO)];
    assert_eq!(batch_timeout(timeout, &gone, now), Duration::ZERO);
}

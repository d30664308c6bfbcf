//! The attempt's trace (SPEC §23), for `--trace-dir`.

use opm_core::effect::Effect;
use opm_core::trace::{Recorder, TraceHeader};
use opm_core::{Input, ReleaseKey};

use super::Runtime;

/// The attempt's trace, appended to the `--trace-dir` sink when set.
pub(super) struct Trace<'a> {
    recorder: Option<Recorder>,
    sink: Option<&'a crate::ops::trace_sink::TraceSink>,
}

impl<'a> Trace<'a> {
    pub(super) fn new(rt: &'a Runtime, key: &ReleaseKey, id: u64) -> Self {
        match &rt.traces {
            Some(sink) => Self {
                recorder: Some(Recorder::new(
                    &TraceHeader::new(&rt.config, key.clone()).with_attempt(id),
                )),
                sink: Some(sink),
            },
            None => Self {
                recorder: None,
                sink: None,
            },
        }
    }

    pub(super) fn input(&mut self, input: &Input) {
        if let Some(r) = &mut self.recorder {
            r.input(input);
        }
    }

    pub(super) fn effects(&mut self, batch: &[Effect]) {
        if let Some(r) = &mut self.recorder {
            r.effects(batch);
        }
    }

    pub(super) fn health_deadline_at(&mut self, steps: u64) {
        if let Some(r) = &mut self.recorder {
            r.health_deadline_at(steps);
        }
    }

    pub(super) fn write(&self) {
        if let (Some(r), Some(sink)) = (&self.recorder, self.sink)
            && let Err(e) = sink.write_attempt(&r.to_jsonl())
        {
            tracing::warn!(error = %e, "writing the trace failed");
        }
    }
}

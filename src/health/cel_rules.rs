//! `healthCheckExprs` in CEL (Flux's shape), compiled once per attempt and evaluated over
//! the object's JSON. SPEC §26 order: `failed` first, then `current`, then `inProgress`,
//! else `InProgress`.
//!
//! An expression that does not compile is the user's error and is reported before anything
//! waits on it ([`compile`]); an expression that compiles but cannot be evaluated on this
//! object (most often: `status` not written yet) counts as not matching, and its error is
//! kept in the message so the user sees why nothing matched. The evaluation counts its
//! steps and bytes as it runs ([`super::cel_eval`]): one that reaches the budget, or the
//! interpreter's deadline, stops and the object is `Failed` saying so (SPEC §24), because a
//! worker every tenant shares must not spend minutes or gigabytes on one tenant's loop.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cel::Program;
use serde_json::Value;

use super::cel_eval::{Compiled, EvalError, MAX_BYTES, MAX_STEPS, Spent, Stop};
use super::{Assessment, HealthStatus, group_of};
use crate::api::HealthCheckExpr;

/// The deadline of an attempt's CEL evaluations (`--health-eval-timeout`, SPEC §24).
///
/// The core has no clock: the interpreter runs the evaluations on a blocking thread and
/// raises this flag when the attempt's time is up; every evaluation checks it at each step
/// and stops. Clones share the flag.
///
/// Where the flag stopped an evaluation is kept as a count of the steps all of the
/// attempt's evaluations had taken by then ([`Self::stopped_at`]); the trace records it,
/// and a replay stops at the same count ([`Self::replay_stop_at`]), so an attempt cut by
/// the wall clock replays byte for byte without one.
#[derive(Clone, Debug)]
pub struct EvalDeadline {
    flag: Arc<AtomicBool>,
    after: Duration,
    /// Steps taken by this attempt's evaluations so far, all together.
    spent: Arc<AtomicU64>,
    /// That total where the deadline first stopped an evaluation (`u64::MAX`: never).
    stopped_at: Arc<AtomicU64>,
    /// A replay's recorded `stopped_at` (`u64::MAX`: none).
    replay_at: Arc<AtomicU64>,
}

impl Default for EvalDeadline {
    fn default() -> Self {
        Self::new(Duration::ZERO)
    }
}

impl EvalDeadline {
    /// A deadline not raised yet, of `after` (named in the message when it is).
    pub fn new(after: Duration) -> Self {
        Self {
            flag: Arc::default(),
            after,
            spent: Arc::default(),
            stopped_at: Arc::new(AtomicU64::new(u64::MAX)),
            replay_at: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    /// Raises the flag: every evaluation sharing it stops at its next step.
    pub fn expire(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether the flag is raised.
    pub fn expired(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// The time the evaluations of one attempt may take.
    pub fn after(&self) -> Duration {
        self.after
    }

    /// The attempt's total of evaluation steps at which the deadline first stopped one,
    /// if it did: what a trace records for [`Self::replay_stop_at`].
    pub fn stopped_at(&self) -> Option<u64> {
        Some(self.stopped_at.load(Ordering::Relaxed)).filter(|&n| n != u64::MAX)
    }

    /// Replays a deadline recorded by [`Self::stopped_at`]: evaluations stop once the
    /// attempt's total reaches `steps`, exactly where the live run's flag stopped them.
    pub fn replay_stop_at(&self, steps: u64) {
        self.replay_at.store(steps, Ordering::Relaxed);
    }

    /// The step count at which an evaluation starting now counts as interrupted.
    fn stop_at(&self) -> u64 {
        match self.replay_at.load(Ordering::Relaxed) {
            u64::MAX => u64::MAX,
            at => at.saturating_sub(self.spent.load(Ordering::Relaxed)),
        }
    }

    /// Adds an evaluation's steps to the attempt's total; `interrupted` when the deadline
    /// stopped it.
    fn record(&self, steps: u64, interrupted: bool) {
        let before = self.spent.fetch_add(steps, Ordering::Relaxed);
        if interrupted {
            let _ = self.stopped_at.compare_exchange(
                u64::MAX,
                before.saturating_add(steps),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }
}

/// The compiled expressions of one release.
#[derive(Default)]
pub struct HealthRules {
    rules: Vec<Rule>,
    deadline: Option<EvalDeadline>,
}

impl std::fmt::Debug for HealthRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.rules.iter().map(|r| (&r.group, &r.kind)))
            .finish()
    }
}

struct Rule {
    group: String,
    kind: String,
    failed: Option<Compiled>,
    current: Compiled,
    in_progress: Option<Compiled>,
}

/// Which expression of which entry did not compile, and why (SPEC §26: a stall naming it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("healthCheckExprs[{index}] ({api_version} {kind}) {field}: {message}")]
pub struct CompileError {
    /// Position of the entry in `healthCheckExprs`.
    pub index: usize,
    /// The entry's `apiVersion`, so the user finds it.
    pub api_version: String,
    /// The entry's `kind`.
    pub kind: String,
    /// Which expression (`current`, `failed`, `inProgress`) failed to compile.
    pub field: &'static str,
    /// The CEL compiler's complaint.
    pub message: String,
}

/// CEL sources are user input of any size; the parser gets a bounded one.
const MAX_EXPR_LEN: usize = 4096;

/// Brackets (`(`, `[`, `{`) nested deeper than this are refused before parsing: the `cel`
/// crate's generated parser recurses through some fifteen grammar rules per level, about
/// 170 KiB of stack per level in a debug build, so a dozen levels written by a tenant
/// would overflow a 2 MiB thread stack and abort the process (no unwinding catches that).
/// Health rules need a handful of levels.
const MAX_NESTING: usize = 8;

/// How deeply brackets nest in `src`, string literals skipped.
fn nesting(src: &str) -> usize {
    let b = src.as_bytes();
    let (mut i, mut depth, mut max) = (0, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            q @ (b'\'' | b'"') => {
                let raw = i > 0 && matches!(b[i - 1], b'r' | b'R');
                let triple = b[i..].starts_with(&[q, q, q]);
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if b[i] == b'\\' && !raw {
                        i += 2;
                        continue;
                    }
                    if triple && b[i..].starts_with(&[q, q, q]) {
                        i += 2;
                        break;
                    }
                    if !triple && b[i] == q {
                        break;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    max
}

fn compile_one(src: &str) -> Result<Compiled, String> {
    if src.trim().is_empty() {
        return Err("the expression is empty".to_string());
    }
    if src.len() > MAX_EXPR_LEN {
        return Err(format!(
            "the expression is {} bytes; the limit is {MAX_EXPR_LEN}",
            src.len()
        ));
    }
    let depth = nesting(src);
    if depth > MAX_NESTING {
        return Err(format!(
            "brackets nest {depth} deep; the limit is {MAX_NESTING}"
        ));
    }
    // The parser is generated code: a bug in it must not take the operator down.
    match catch_unwind(AssertUnwindSafe(|| Program::compile(src))) {
        Ok(Ok(p)) => super::cel_eval::check(p),
        Ok(Err(e)) => Err(one_line(&e.to_string())),
        Err(_) => Err("the CEL parser could not read this expression".to_string()),
    }
}

fn one_line(s: &str) -> String {
    let s: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    crate::conditions::truncate(&s.join(" "), 512)
}

/// Compiles every entry; the first expression that does not compile is the error.
pub fn compile(exprs: &[HealthCheckExpr]) -> Result<HealthRules, CompileError> {
    let mut rules = Vec::with_capacity(exprs.len());
    for (index, e) in exprs.iter().enumerate() {
        let err = |field: &'static str, message: String| CompileError {
            index,
            api_version: e.api_version.clone(),
            kind: e.kind.clone(),
            field,
            message,
        };
        let opt = |field: &'static str, src: &Option<String>| match src {
            None => Ok(None),
            Some(s) => compile_one(s).map(Some).map_err(|m| err(field, m)),
        };
        rules.push(Rule {
            group: group_of(&e.api_version).to_string(),
            kind: e.kind.clone(),
            failed: opt("failed", &e.failed)?,
            current: compile_one(&e.current).map_err(|m| err("current", m))?,
            in_progress: opt("inProgress", &e.in_progress)?,
        });
    }
    Ok(HealthRules {
        rules,
        deadline: None,
    })
}

/// The verdict on an object whose expression stopped before its end (SPEC §24).
fn stopped(
    kind: &str,
    field: &str,
    stop: Stop,
    spent: Spent,
    deadline: Option<&EvalDeadline>,
) -> Assessment {
    let Spent { steps, bytes } = spent;
    let head = format!("health expression of {kind} stopped after {steps} steps / {bytes} bytes");
    let why = match (stop, deadline) {
        (Stop::Interrupted, Some(d)) => format!(
            "{field}: this attempt's expressions ran over {:?} (--health-eval-timeout)",
            d.after()
        ),
        (Stop::Interrupted, None) => format!("{field}: interrupted"),
        (Stop::Budget, _) => format!(
            "{field}: the budget of one evaluation is {MAX_STEPS} steps and {MAX_BYTES} \
             bytes; walk fewer or shorter lists, build fewer strings"
        ),
    };
    Assessment::new(HealthStatus::Failed, format!("{head} ({why})"))
}

impl HealthRules {
    /// The verdict of the first entry for `group`/`kind`, if there is one.
    pub(super) fn evaluate(&self, group: &str, kind: &str, obj: &Value) -> Option<Assessment> {
        let rule = self
            .rules
            .iter()
            .find(|r| r.kind == kind && r.group == group)?;
        let mut errors = Vec::new();
        let in_order = [
            ("failed", rule.failed.as_ref(), HealthStatus::Failed),
            ("current", Some(&rule.current), HealthStatus::Current),
            (
                "inProgress",
                rule.in_progress.as_ref(),
                HealthStatus::InProgress,
            ),
        ];
        for (name, program, status) in in_order {
            let Some(program) = program else { continue };
            let interrupt = self.deadline.as_ref().map(|d| &*d.flag);
            let stop_at = self
                .deadline
                .as_ref()
                .map_or(u64::MAX, EvalDeadline::stop_at);
            // The evaluator is this crate's own code over any JSON; should it ever panic,
            // the object is judged, not the operator.
            let run = catch_unwind(AssertUnwindSafe(|| {
                program.evaluate(obj, interrupt, stop_at)
            }));
            if let (Some(d), Ok((r, spent))) = (&self.deadline, &run) {
                let interrupted = matches!(r, Err(EvalError::Stopped(Stop::Interrupted)));
                d.record(spent.steps, interrupted);
            }
            match run {
                Ok((Ok(true), _)) => {
                    let msg = format!("healthCheckExprs: {name} is true");
                    return Some(Assessment::new(status, msg));
                }
                Ok((Ok(false), _)) => {}
                Ok((Err(EvalError::Failed(e)), _)) => errors.push(format!("{name}: {e}")),
                Ok((Err(EvalError::Stopped(stop)), spent)) => {
                    let d = self.deadline.as_ref();
                    return Some(stopped(kind, name, stop, spent, d));
                }
                Err(_) => errors.push(format!("{name}: the evaluator failed on this object")),
            }
        }
        let mut msg = "healthCheckExprs: current is not true yet".to_string();
        if !errors.is_empty() {
            msg.push_str(&format!(" ({})", errors.join("; ")));
        }
        Some(Assessment::new(HealthStatus::InProgress, msg))
    }

    /// These rules, stopping at `deadline` once the interpreter raises it.
    pub fn with_deadline(mut self, deadline: EvalDeadline) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// No custom rules: the built-in assessment alone decides.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// A `dependsOn` entry's `readyExpr` (SPEC §32): CEL over the object, named `self` and
/// `dep`, with the bounds of `healthCheckExprs` (SPEC §24: steps and bytes).
pub struct ReadyExpr(Compiled);

impl std::fmt::Debug for ReadyExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadyExpr")
    }
}

/// Why a `readyExpr` gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyExprError {
    /// It failed on this object (a missing field, a wrong type): the object may not be
    /// there yet, so the release waits.
    Failed(String),
    /// It ran out of its step or byte budget: it never will finish, whatever the object.
    Stopped {
        /// Steps taken when it stopped.
        steps: u64,
        /// Bytes allocated when it stopped.
        bytes: u64,
    },
}

impl ReadyExpr {
    /// Compiles `src` (bounded in length and nesting like every expression of SPEC §24).
    pub fn compile(src: &str) -> Result<ReadyExpr, String> {
        compile_one(src).map(ReadyExpr)
    }

    /// Whether the expression is true of `obj`.
    pub fn ready(&self, obj: &Value) -> Result<bool, ReadyExprError> {
        let run = catch_unwind(AssertUnwindSafe(|| {
            self.0.evaluate_as(obj, None, u64::MAX, true)
        }));
        match run {
            Ok((Ok(b), _)) => Ok(b),
            Ok((Err(EvalError::Failed(e)), _)) => Err(ReadyExprError::Failed(e.to_string())),
            Ok((Err(EvalError::Stopped(_)), spent)) => Err(ReadyExprError::Stopped {
                steps: spent.steps,
                bytes: spent.bytes,
            }),
            Err(_) => Err(ReadyExprError::Failed(
                "the evaluator failed on this object".to_string(),
            )),
        }
    }
}

//! `healthCheckExprs` in CEL (Flux's shape), compiled once per attempt and evaluated over
//! the object's JSON. SPEC §26 order: `failed` first, then `current`, then `inProgress`,
//! else `InProgress`.
//!
//! An expression that does not compile is the user's error and is reported before anything
//! waits on it ([`compile`]); an expression that compiles but cannot be evaluated on this
//! object (most often: `status` not written yet) counts as not matching, and its error is
//! kept in the message so the user sees why nothing matched. An expression whose estimated
//! cost on this object is over the budget ([`super::cel_cost`]) is not run: the object is
//! `Failed` with a message that says so, because a worker every tenant shares must not
//! spend minutes in one tenant's loop.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cel::{Context, Program, Value as CelValue};
use serde_json::Value;

use super::cel_cost::{self, MAX_COST, MAX_LOOP_DEPTH, Widths};
use super::{Assessment, HealthStatus, group_of};
use crate::api::HealthCheckExpr;

/// The compiled expressions of one release.
#[derive(Default)]
pub struct HealthRules {
    rules: Vec<Rule>,
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
    failed: Option<Program>,
    current: Program,
    in_progress: Option<Program>,
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

fn compile_one(src: &str) -> Result<Program, String> {
    if src.trim().is_empty() {
        return Err("the expression is empty".to_string());
    }
    if src.len() > MAX_EXPR_LEN {
        return Err(format!(
            "the expression is {} bytes; the limit is {MAX_EXPR_LEN}",
            src.len()
        ));
    }
    // The parser is generated code: a bug in it must not take the operator down.
    match catch_unwind(AssertUnwindSafe(|| Program::compile(src))) {
        Ok(Ok(p)) => {
            let depth = cel_cost::loop_depth(p.expression());
            if depth > MAX_LOOP_DEPTH {
                return Err(format!(
                    "loops nest {depth} deep; the limit is {MAX_LOOP_DEPTH} (each level \
                     multiplies the cost by the length of a list)"
                ));
            }
            Ok(p)
        }
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
    Ok(HealthRules { rules })
}

enum Eval {
    True,
    False,
    Error(String),
    /// Not run: the estimate is over [`MAX_COST`].
    TooCostly(u64),
}

fn eval(p: &Program, obj: &Value, widths: Widths) -> Eval {
    let estimate = cel_cost::cost(p.expression(), widths);
    if estimate > MAX_COST {
        return Eval::TooCostly(estimate);
    }
    let run = || -> Eval {
        let mut ctx = Context::default();
        if let Some(map) = obj.as_object() {
            for (k, v) in map {
                if ctx.add_variable(k.as_str(), v).is_err() {
                    return Eval::Error(format!("field {k} cannot be read by CEL"));
                }
            }
        }
        if ctx.add_variable("self", obj).is_err() {
            return Eval::Error("the object cannot be read by CEL".to_string());
        }
        match p.execute(&ctx) {
            Ok(CelValue::Bool(true)) => Eval::True,
            Ok(CelValue::Bool(false)) => Eval::False,
            Ok(other) => Eval::Error(format!("returned {:?}, not a bool", other.type_of())),
            Err(e) => Eval::Error(one_line(&e.to_string())),
        }
    };
    catch_unwind(AssertUnwindSafe(run))
        .unwrap_or_else(|_| Eval::Error("the CEL evaluator failed on this object".to_string()))
}

/// The verdict on an object whose expression was not run: over the evaluation budget.
fn over_budget(name: &str, estimate: u64, w: Widths) -> Assessment {
    Assessment::new(
        HealthStatus::Failed,
        format!(
            "healthCheckExprs: {name} was not evaluated: on this object (lists of up to {} \
             items, strings of up to {} bytes) its estimated cost is {estimate} steps, over \
             the budget of {MAX_COST}; walk fewer or shorter lists",
            w.items, w.chars
        ),
    )
}

impl HealthRules {
    /// The verdict of the first entry for `group`/`kind`, if there is one.
    pub(super) fn evaluate(&self, group: &str, kind: &str, obj: &Value) -> Option<Assessment> {
        let rule = self
            .rules
            .iter()
            .find(|r| r.kind == kind && r.group == group)?;
        let widths = Widths::of(obj);
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
            match eval(program, obj, widths) {
                Eval::True => {
                    let msg = format!("healthCheckExprs: {name} is true");
                    return Some(Assessment::new(status, msg));
                }
                Eval::False => {}
                Eval::Error(e) => errors.push(format!("{name}: {e}")),
                Eval::TooCostly(estimate) => return Some(over_budget(name, estimate, widths)),
            }
        }
        let mut msg = "healthCheckExprs: current is not true yet".to_string();
        if !errors.is_empty() {
            msg.push_str(&format!(" ({})", errors.join("; ")));
        }
        Some(Assessment::new(HealthStatus::InProgress, msg))
    }

    /// No custom rules: the built-in assessment alone decides.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

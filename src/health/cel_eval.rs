//! The evaluator of `healthCheckExprs`: CEL over an object's JSON, counting as it goes.
//!
//! Why not the `cel` crate's interpreter: it can't be stopped. Its comprehensions, string
//! `+`, list building, equality and `matches` (a fresh regex per call) run inside the crate
//! with no hook for a budget, so a tenant's one expression could take gigabytes or minutes
//! of a worker every tenant shares (issue 31). The crate's parser stays (it is the CEL
//! grammar and expands the macros into comprehensions); this module walks the AST it
//! builds, over the object's own `serde_json` values (borrowed, never copied), and charges
//! every step it takes and every byte it allocates *before* it takes or allocates them:
//!
//! - a step is one node evaluated, one loop iteration, one element compared, or
//!   [`SCAN_BYTES`] bytes of a string scanned or matched;
//! - bytes are what an evaluation builds: strings (`+`, conversions, `lowerAscii`),
//!   list and map literals and the lists `map`/`filter` build ([`SLOT`] bytes per element),
//!   and each regular expression compiled from a pattern that is not a literal.
//!
//! Past [`MAX_STEPS`] or [`MAX_BYTES`], or once the caller's interrupt flag is raised (the
//! interpreter's deadline, `--health-eval-timeout`), the evaluation stops with
//! [`Stop`]. An error never quotes a value of the object: only the expression's own field
//! names, types and the kind of error (SPEC §24).
//!
//! The subset is what health rules use: literals, field selection, `has`, indexing, the
//! operators, `in`, the macros (`all`, `exists`, `exists_one`, `map`, `filter`), `size`,
//! `contains`, `startsWith`, `endsWith`, `matches`, `lowerAscii`, `upperAscii` and the
//! conversions `int`, `uint`, `double`, `string`, `bool`, `dyn`. Anything else is refused
//! when the expression is compiled ([`check`]), so a user learns it at once.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators as op};
use serde_json::Value;

mod eval;
mod functions;
mod ops;
mod value;

use value::Val;

/// Steps one evaluation may take (the per-call limit Kubernetes gives CEL in CRD rules).
pub const MAX_STEPS: u64 = 1_000_000;
/// Bytes one evaluation may allocate (SPEC §24).
pub const MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes charged per element of a list or map an evaluation builds.
pub(super) const SLOT: u64 = size_of::<Val<'static>>() as u64;
/// Bytes of a string scanned (or compared, or matched) per step.
pub(super) const SCAN_BYTES: u64 = 8;
/// Size limit of one compiled regular expression (the `regex` crate's own bound), and
/// twice this is charged for each one compiled while an expression runs.
const REGEX_SIZE: usize = 256 * 1024;
/// Distinct patterns kept compiled per expression.
const REGEX_CACHE: usize = 64;
/// Nesting of the evaluation (the parser bounds the AST; this bounds the stack anyway).
const MAX_DEPTH: u32 = 200;

/// What an evaluation spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Spent {
    /// Steps taken.
    pub steps: u64,
    /// Bytes allocated.
    pub bytes: u64,
}

/// Why an evaluation stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// Over [`MAX_STEPS`] or [`MAX_BYTES`].
    Budget,
    /// The interrupt flag was raised (the caller's deadline).
    Interrupted,
}

/// An evaluation that produced no bool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EvalError {
    /// Stopped by the budget or the deadline: never absorbed by `||`/`&&`.
    Stopped(Stop),
    /// A CEL error (no such key, no overload, …), worded without any value of the object.
    Failed(Rc<str>),
}

fn failed<T>(msg: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError::Failed(Rc::from(msg.into())))
}

/// One compiled expression: the parsed program and its regular expressions.
pub(super) struct Compiled {
    program: cel::Program,
    /// Patterns compiled once per expression: the literal ones when the expression is
    /// compiled, the others the first time an evaluation meets them.
    regexes: Mutex<HashMap<String, Arc<regex::Regex>>>,
}

fn build_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE)
        .dfa_size_limit(REGEX_SIZE)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => {
                format!("a regular expression is over the size limit of {REGEX_SIZE} bytes")
            }
            _ => "a pattern is not a valid regular expression".to_string(),
        })
}

/// Functions (and operators) the evaluator knows.
const FUNCTIONS: &[&str] = &[
    op::LOGICAL_AND,
    op::LOGICAL_OR,
    op::LOGICAL_NOT,
    op::CONDITIONAL,
    op::NOT_STRICTLY_FALSE,
    op::EQUALS,
    op::NOT_EQUALS,
    op::LESS,
    op::LESS_EQUALS,
    op::GREATER,
    op::GREATER_EQUALS,
    op::ADD,
    op::SUBSTRACT,
    op::MULTIPLY,
    op::DIVIDE,
    op::MODULO,
    op::NEGATE,
    op::INDEX,
    op::IN,
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "lowerAscii",
    "upperAscii",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "dyn",
];

/// Refuses what the evaluator does not implement, and compiles the literal patterns.
pub(super) fn check(program: cel::Program) -> Result<Compiled, String> {
    let mut regexes = HashMap::new();
    walk(program.expression(), &mut regexes)?;
    Ok(Compiled {
        program,
        regexes: Mutex::new(regexes),
    })
}

fn walk(e: &IdedExpr, regexes: &mut HashMap<String, Arc<regex::Regex>>) -> Result<(), String> {
    match &e.expr {
        Expr::Unspecified => Err("the expression is incomplete".to_string()),
        Expr::Struct(_) => Err("message literals are not supported".to_string()),
        Expr::Literal(_) | Expr::Ident(_) => Ok(()),
        Expr::Select(s) => walk(&s.operand, regexes),
        Expr::List(l) => {
            if !l.optional_indices.is_empty() {
                return Err("optional list elements are not supported".to_string());
            }
            l.elements.iter().try_for_each(|x| walk(x, regexes))
        }
        Expr::Map(m) => m.entries.iter().try_for_each(|en| match &en.expr {
            EntryExpr::MapEntry(me) if !me.optional => {
                walk(&me.key, regexes)?;
                walk(&me.value, regexes)
            }
            _ => Err("optional map entries are not supported".to_string()),
        }),
        Expr::Comprehension(c) => {
            if c.iter_var2.is_some() {
                return Err("two-variable comprehensions are not supported".to_string());
            }
            [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .try_for_each(|x| walk(x, regexes))
        }
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            if !FUNCTIONS.contains(&name) {
                return Err(format!(
                    "function {name} is not supported in health expressions"
                ));
            }
            if name == "matches" {
                let pattern = call.args.last().map(|a| &a.expr);
                if let Some(Expr::Literal(LiteralValue::String(p))) = pattern {
                    let re = build_regex(p.inner())?;
                    regexes.insert(p.inner().to_string(), Arc::new(re));
                }
            }
            if let Some(t) = &call.target {
                walk(t, regexes)?;
            }
            call.args.iter().try_for_each(|x| walk(x, regexes))
        }
    }
}

impl Compiled {
    /// Evaluates the expression over `obj` (its top-level fields are variables, and `self`
    /// is the whole object). `interrupt`, once raised, stops it at the next step, and so
    /// does reaching `stop_at` steps (`u64::MAX`: never): a replay stops where the live
    /// run's deadline did, without a clock.
    pub(super) fn evaluate(
        &self,
        obj: &Value,
        interrupt: Option<&AtomicBool>,
        stop_at: u64,
    ) -> (Result<bool, EvalError>, Spent) {
        self.evaluate_as(obj, interrupt, stop_at, false)
    }

    /// [`Compiled::evaluate`], where `dep_alias` makes `dep` a second name of `self`.
    pub(super) fn evaluate_as(
        &self,
        obj: &Value,
        interrupt: Option<&AtomicBool>,
        stop_at: u64,
        dep_alias: bool,
    ) -> (Result<bool, EvalError>, Spent) {
        let mut ev = Ev {
            dep_alias,
            root: obj,
            vars: Vec::new(),
            spent: Spent::default(),
            interrupt,
            stop_at,
            regexes: &self.regexes,
            depth: 0,
        };
        let r = match ev.eval(self.program.expression()) {
            Ok(Val::Bool(b)) => Ok(b),
            Ok(v) => failed(format!("returned {}, not a bool", v.type_name())),
            Err(e) => Err(e),
        };
        (r, ev.spent)
    }
}

struct Ev<'a, 'c> {
    root: &'a Value,
    vars: Vec<(&'a str, Val<'a>)>,
    spent: Spent,
    interrupt: Option<&'c AtomicBool>,
    /// Steps at which this evaluation counts as interrupted (a replayed deadline).
    stop_at: u64,
    regexes: &'c Mutex<HashMap<String, Arc<regex::Regex>>>,
    depth: u32,
    /// `dep` names the whole object too (a `dependsOn` entry's `readyExpr`, SPEC §32).
    dep_alias: bool,
}

type R<'a> = Result<Val<'a>, EvalError>;

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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators as op};
use serde_json::{Map, Value};

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

/// A CEL value: the object's own JSON is borrowed, what the evaluation builds is shared.
#[derive(Clone, Debug)]
pub(super) enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Str<'a>),
    Bytes(&'a [u8]),
    List(Rc<Vec<Val<'a>>>),
    Map(Rc<Vec<(Val<'a>, Val<'a>)>>),
    JList(&'a [Value]),
    JMap(&'a Map<String, Value>),
    /// An error held by a comprehension's accumulator (CEL lets `||` absorb it later).
    Error(Rc<str>),
}

/// A string: borrowed from the object or the expression, or built by the evaluation.
#[derive(Clone, Debug)]
pub(super) enum Str<'a> {
    B(&'a str),
    O(Rc<str>),
}

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Str::B(s) => s,
            Str::O(s) => s,
        }
    }
}

fn json<'a>(v: &'a Value) -> Val<'a> {
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Val::Int(i)
            } else if let Some(u) = n.as_u64() {
                Val::Uint(u)
            } else {
                Val::Double(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Val::Str(Str::B(s)),
        Value::Array(a) => Val::JList(a),
        Value::Object(m) => Val::JMap(m),
    }
}

impl<'a> Val<'a> {
    fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int",
            Val::Uint(_) => "uint",
            Val::Double(_) => "double",
            Val::Str(_) => "string",
            Val::Bytes(_) => "bytes",
            Val::List(_) | Val::JList(_) => "list",
            Val::Map(_) | Val::JMap(_) => "map",
            Val::Error(_) => "error",
        }
    }

    fn list_len(&self) -> Option<usize> {
        match self {
            Val::List(l) => Some(l.len()),
            Val::JList(l) => Some(l.len()),
            _ => None,
        }
    }

    fn list_get(&self, i: usize) -> Option<Val<'a>> {
        match self {
            Val::List(l) => l.get(i).cloned(),
            Val::JList(l) => l.get(i).map(json),
            _ => None,
        }
    }

    fn map_len(&self) -> Option<usize> {
        match self {
            Val::Map(m) => Some(m.len()),
            Val::JMap(m) => Some(m.len()),
            _ => None,
        }
    }
}

/// Numbers of any of CEL's three types, compared as numbers.
fn num_cmp(a: &Val, b: &Val) -> Option<Option<std::cmp::Ordering>> {
    use Val::*;
    let as_f = |v: &Val| match v {
        Int(i) => Some(*i as f64),
        Uint(u) => Some(*u as f64),
        Double(d) => Some(*d),
        _ => None,
    };
    Some(match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Uint(x), Uint(y)) => Some(x.cmp(y)),
        (Int(x), Uint(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Uint(x), Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        _ => as_f(a)?.partial_cmp(&as_f(b)?),
    })
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

impl<'a> Ev<'a, '_> {
    /// Charges `n` steps; stops past the budget or once interrupted.
    fn step(&mut self, n: u64) -> Result<(), EvalError> {
        self.spent.steps = self.spent.steps.saturating_add(n);
        if self.spent.steps > MAX_STEPS {
            return Err(EvalError::Stopped(Stop::Budget));
        }
        if self.spent.steps >= self.stop_at
            || self.interrupt.is_some_and(|f| f.load(Ordering::Relaxed))
        {
            return Err(EvalError::Stopped(Stop::Interrupted));
        }
        Ok(())
    }

    /// Charges `n` bytes about to be allocated; stops past the budget.
    fn alloc(&mut self, n: u64) -> Result<(), EvalError> {
        self.spent.bytes = self.spent.bytes.saturating_add(n);
        if self.spent.bytes > MAX_BYTES {
            return Err(EvalError::Stopped(Stop::Budget));
        }
        Ok(())
    }

    /// Charges a scan of `len` bytes.
    fn scan(&mut self, len: usize) -> Result<(), EvalError> {
        self.step(1 + len as u64 / SCAN_BYTES)
    }

    fn eval(&mut self, e: &'a IdedExpr) -> R<'a> {
        self.step(1)?;
        if self.depth >= MAX_DEPTH {
            return failed("the expression nests too deeply");
        }
        self.depth += 1;
        let r = self.eval_inner(e);
        self.depth -= 1;
        r
    }

    fn eval_inner(&mut self, e: &'a IdedExpr) -> R<'a> {
        match &e.expr {
            Expr::Literal(l) => Ok(match l {
                LiteralValue::Boolean(b) => Val::Bool(*b.inner()),
                LiteralValue::Int(i) => Val::Int(*i.inner()),
                LiteralValue::UInt(u) => Val::Uint(*u.inner()),
                LiteralValue::Double(d) => Val::Double(*d.inner()),
                LiteralValue::Null => Val::Null,
                LiteralValue::String(s) => Val::Str(Str::B(s.inner())),
                LiteralValue::Bytes(b) => Val::Bytes(b.inner()),
            }),
            Expr::Ident(name) => self.lookup(name),
            Expr::Select(s) => {
                let operand = self.eval(&s.operand)?;
                self.select(operand, &s.field, s.test)
            }
            Expr::List(l) => {
                self.alloc(SLOT * l.elements.len() as u64)?;
                let mut out = Vec::with_capacity(l.elements.len());
                for x in &l.elements {
                    out.push(self.eval(x)?);
                }
                Ok(Val::List(Rc::new(out)))
            }
            Expr::Map(m) => {
                self.alloc(2 * SLOT * m.entries.len() as u64)?;
                let mut out: Vec<(Val, Val)> = Vec::with_capacity(m.entries.len());
                for en in &m.entries {
                    let EntryExpr::MapEntry(me) = &en.expr else {
                        return failed("message literals are not supported");
                    };
                    let k = self.eval(&me.key)?;
                    if !matches!(k, Val::Str(_) | Val::Int(_) | Val::Uint(_) | Val::Bool(_)) {
                        return failed(format!("a map key cannot be a {}", k.type_name()));
                    }
                    for (old, _) in &out {
                        if self.eq(old, &k)? {
                            return failed("a map literal repeats a key");
                        }
                    }
                    let v = self.eval(&me.value)?;
                    out.push((k, v));
                }
                Ok(Val::Map(Rc::new(out)))
            }
            Expr::Comprehension(c) => {
                let mark = self.vars.len();
                let r = self.comprehension(c);
                self.vars.truncate(mark);
                r
            }
            Expr::Call(call) => self.call(call),
            Expr::Struct(_) | Expr::Unspecified => failed("unsupported expression"),
        }
    }

    fn lookup(&mut self, name: &str) -> R<'a> {
        if let Some((_, v)) = self.vars.iter().rev().find(|(n, _)| *n == name) {
            return match v {
                Val::Error(e) => Err(EvalError::Failed(e.clone())),
                v => Ok(v.clone()),
            };
        }
        if name == "self" || (self.dep_alias && name == "dep") {
            return Ok(json(self.root));
        }
        match self.root.get(name) {
            Some(v) => Ok(json(v)),
            None => failed(format!("no such key '{name}'")),
        }
    }

    /// A comprehension's accumulator, taken out of its scope so that `@result + [x]`
    /// appends in place instead of copying the list on every iteration.
    fn take_accumulator(&mut self, name: &str) -> Option<Val<'a>> {
        let slot = self.vars.iter_mut().rev().find(|(n, _)| *n == name)?;
        Some(std::mem::replace(&mut slot.1, Val::Null))
    }

    fn select(&mut self, operand: Val<'a>, field: &str, test: bool) -> R<'a> {
        let found = match &operand {
            Val::JMap(m) => m.get(field).map(json),
            Val::Map(m) => {
                self.step(m.len() as u64)?;
                m.iter()
                    .find(|(k, _)| matches!(k, Val::Str(s) if &**s == field))
                    .map(|(_, v)| v.clone())
            }
            other => {
                let what = if test { "has()" } else { "selecting a field" };
                return failed(format!(
                    "{what} needs a map, not a {} (at '{field}')",
                    other.type_name()
                ));
            }
        };
        match (found, test) {
            (f, true) => Ok(Val::Bool(f.is_some())),
            (Some(v), false) => Ok(v),
            (None, false) => failed(format!("no such key '{field}'")),
        }
    }

    fn comprehension(&mut self, c: &'a cel::common::ast::ComprehensionExpr) -> R<'a> {
        let range = self.eval(&c.iter_range)?;
        // A map is walked by its keys, a list by its elements; neither is copied.
        let mut keys = match &range {
            Val::JMap(m) => Some(m.keys()),
            _ => None,
        };
        let len = match (&range, range.list_len(), range.map_len()) {
            (_, Some(n), _) | (_, _, Some(n)) => n,
            (other, None, None) => {
                return failed(format!(
                    "a macro needs a list or map, not a {}",
                    other.type_name()
                ));
            }
        };
        let accu = self.eval(&c.accu_init)?;
        self.vars.push((&c.accu_var, accu));
        let accu_at = self.vars.len() - 1;
        for i in 0..len {
            self.step(1)?;
            let item = match (&mut keys, &range) {
                (Some(k), _) => k.next().map_or(Val::Null, |k| Val::Str(Str::B(k))),
                (None, Val::Map(m)) => m.get(i).map_or(Val::Null, |(k, _)| k.clone()),
                (None, r) => r.list_get(i).unwrap_or(Val::Null),
            };
            self.vars.push((&c.iter_var, item));
            let go = match self.eval(&c.loop_cond)? {
                Val::Bool(b) => b,
                other => {
                    return failed(format!(
                        "a macro's condition is a {}, not a bool",
                        other.type_name()
                    ));
                }
            };
            if !go {
                break;
            }
            let next = match self.eval(&c.loop_step) {
                Ok(v) => v,
                Err(EvalError::Failed(m)) => Val::Error(m),
                Err(stop) => return Err(stop),
            };
            self.vars.pop();
            self.vars[accu_at].1 = next;
        }
        self.vars.truncate(accu_at + 1);
        self.eval(&c.result)
    }

    fn bool_of(&mut self, e: &'a IdedExpr) -> Result<Result<bool, EvalError>, EvalError> {
        match self.eval(e) {
            Ok(Val::Bool(b)) => Ok(Ok(b)),
            Ok(other) => Ok(failed(format!(
                "a logical operator needs bools, not a {}",
                other.type_name()
            ))),
            Err(EvalError::Stopped(s)) => Err(EvalError::Stopped(s)),
            Err(e) => Ok(Err(e)),
        }
    }

    fn call(&mut self, call: &'a cel::common::ast::CallExpr) -> R<'a> {
        let name = call.func_name.as_str();
        let args = &call.args;
        // Short-circuiting forms first: their arguments are not all evaluated.
        match (name, args.as_slice()) {
            (op::LOGICAL_AND | op::LOGICAL_OR, [a, b]) => {
                // CEL's commutative logic: a deciding operand wins over an error.
                let decides = name == op::LOGICAL_OR;
                let l = self.bool_of(a)?;
                if l == Ok(decides) {
                    return Ok(Val::Bool(decides));
                }
                let r = self.bool_of(b)?;
                return match (l, r) {
                    (_, Ok(x)) if x == decides => Ok(Val::Bool(decides)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                    (Ok(_), Ok(_)) => Ok(Val::Bool(!decides)),
                };
            }
            (op::CONDITIONAL, [c, t, f]) => {
                return match self.eval(c)? {
                    Val::Bool(true) => self.eval(t),
                    Val::Bool(false) => self.eval(f),
                    other => failed(format!(
                        "a condition is a {}, not a bool",
                        other.type_name()
                    )),
                };
            }
            (op::NOT_STRICTLY_FALSE, [a]) => {
                return match self.eval(a) {
                    Ok(Val::Bool(false)) => Ok(Val::Bool(false)),
                    Err(EvalError::Stopped(s)) => Err(EvalError::Stopped(s)),
                    _ => Ok(Val::Bool(true)),
                };
            }
            (op::ADD, [a, b]) => {
                let l = match &a.expr {
                    Expr::Ident(n) if n.starts_with('@') => match self.take_accumulator(n) {
                        Some(Val::Error(e)) => return Err(EvalError::Failed(e)),
                        Some(v) => v,
                        None => self.eval(a)?,
                    },
                    _ => self.eval(a)?,
                };
                let r = self.eval(b)?;
                return self.add(l, r);
            }
            _ => {}
        }
        let target = match &call.target {
            Some(t) => Some(self.eval(t)?),
            None => None,
        };
        let mut vals = Vec::with_capacity(args.len() + 1);
        vals.extend(target);
        for a in args {
            vals.push(self.eval(a)?);
        }
        self.apply(name, vals)
    }

    fn apply(&mut self, name: &str, vals: Vec<Val<'a>>) -> R<'a> {
        use Val::*;
        let arity = |n: usize| -> Result<(), EvalError> {
            if vals.len() == n {
                Ok(())
            } else {
                failed(format!("{name} takes {} arguments, not {}", n, vals.len()))
            }
        };
        let no_overload = |vals: &[Val]| -> R<'a> {
            let types: Vec<&str> = vals.iter().map(Val::type_name).collect();
            failed(format!(
                "no matching overload for {name} ({})",
                types.join(", ")
            ))
        };
        match name {
            op::LOGICAL_NOT => match vals.as_slice() {
                [Bool(b)] => Ok(Bool(!b)),
                v => no_overload(v),
            },
            op::EQUALS | op::NOT_EQUALS => {
                arity(2)?;
                let eq = self.eq(&vals[0], &vals[1])?;
                Ok(Bool(eq == (name == op::EQUALS)))
            }
            op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS => {
                arity(2)?;
                let ord = match (&vals[0], &vals[1]) {
                    (Str(a), Str(b)) => {
                        self.scan(a.len().min(b.len()))?;
                        Some(a.cmp(b))
                    }
                    (Bool(a), Bool(b)) => Some(a.cmp(b)),
                    (Bytes(a), Bytes(b)) => Some(a.cmp(b)),
                    (a, b) => match num_cmp(a, b) {
                        Some(o) => o,
                        None => return no_overload(&vals),
                    },
                };
                use std::cmp::Ordering::*;
                Ok(Bool(match (name, ord) {
                    (_, None) => false,
                    (op::LESS, Some(o)) => o == Less,
                    (op::LESS_EQUALS, Some(o)) => o != Greater,
                    (op::GREATER, Some(o)) => o == Greater,
                    (_, Some(o)) => o != Less,
                }))
            }
            op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO => {
                arity(2)?;
                arith(name, &vals[0], &vals[1]).unwrap_or_else(|| no_overload(&vals))
            }
            op::NEGATE => match vals.as_slice() {
                [Int(i)] => i.checked_neg().map(Int).map_or_else(overflow, Ok),
                [Double(d)] => Ok(Double(-d)),
                v => no_overload(v),
            },
            op::INDEX => {
                arity(2)?;
                self.index(&vals[0], &vals[1])
            }
            op::IN => {
                arity(2)?;
                let (x, coll) = (&vals[0], &vals[1]);
                if let Some(n) = coll.list_len() {
                    for i in 0..n {
                        self.step(1)?;
                        let item = coll.list_get(i).unwrap_or(Null);
                        if self.eq(x, &item)? {
                            return Ok(Bool(true));
                        }
                    }
                    return Ok(Bool(false));
                }
                if coll.map_len().is_some() {
                    return Ok(Bool(self.map_get(coll, x)?.is_some()));
                }
                no_overload(&vals)
            }
            "size" => match vals.as_slice() {
                [Str(s)] => {
                    self.scan(s.len())?;
                    Ok(Int(s.chars().count() as i64))
                }
                [Bytes(b)] => Ok(Int(b.len() as i64)),
                [v] => match v.list_len().or(v.map_len()) {
                    Some(n) => Ok(Int(n as i64)),
                    None => no_overload(&vals),
                },
                v => no_overload(v),
            },
            "contains" | "startsWith" | "endsWith" => match vals.as_slice() {
                [Str(s), Str(sub)] => {
                    self.scan(s.len() + sub.len())?;
                    Ok(Bool(match name {
                        "contains" => s.contains(&**sub),
                        "startsWith" => s.starts_with(&**sub),
                        _ => s.ends_with(&**sub),
                    }))
                }
                v => no_overload(v),
            },
            "matches" => match vals.as_slice() {
                [Str(s), Str(p)] => {
                    let re = self.regex(p)?;
                    self.scan(s.len())?;
                    Ok(Bool(re.is_match(s)))
                }
                v => no_overload(v),
            },
            "lowerAscii" | "upperAscii" => match vals.as_slice() {
                [Str(s)] => {
                    self.alloc(s.len() as u64)?;
                    self.scan(s.len())?;
                    let out = if name == "lowerAscii" {
                        s.to_ascii_lowercase()
                    } else {
                        s.to_ascii_uppercase()
                    };
                    Ok(Str(self::Str::O(Rc::from(out))))
                }
                v => no_overload(v),
            },
            "int" | "uint" | "double" | "string" | "bool" | "dyn" => {
                arity(1)?;
                self.convert(name, vals.into_iter().next().unwrap_or(Null))
            }
            _ => failed(format!(
                "function {name} is not supported in health expressions"
            )),
        }
    }

    fn add(&mut self, l: Val<'a>, r: Val<'a>) -> R<'a> {
        use Val::*;
        match (l, r) {
            (Int(a), Int(b)) => a.checked_add(b).map(Int).map_or_else(overflow, Ok),
            (Uint(a), Uint(b)) => a.checked_add(b).map(Uint).map_or_else(overflow, Ok),
            (Double(a), Double(b)) => Ok(Double(a + b)),
            (Str(a), Str(b)) => {
                let n = a.len() + b.len();
                self.alloc(n as u64)?;
                self.scan(n)?;
                let mut s = String::with_capacity(n);
                s.push_str(&a);
                s.push_str(&b);
                Ok(Str(self::Str::O(Rc::from(s))))
            }
            (l, r) if l.list_len().is_some() && r.list_len().is_some() => {
                let rn = r.list_len().unwrap_or(0);
                let mut list = match l {
                    // The accumulator of `map`/`filter`, held only here: appended in place.
                    List(rc) if Rc::strong_count(&rc) == 1 && Rc::weak_count(&rc) == 0 => {
                        self.alloc(SLOT * rn as u64)?;
                        rc
                    }
                    l => {
                        let ln = l.list_len().unwrap_or(0);
                        self.alloc(SLOT * (ln + rn) as u64)?;
                        self.step(ln as u64)?;
                        let mut v = Vec::with_capacity(ln + rn);
                        v.extend((0..ln).filter_map(|i| l.list_get(i)));
                        Rc::new(v)
                    }
                };
                self.step(rn as u64)?;
                let v = Rc::make_mut(&mut list);
                v.extend((0..rn).filter_map(|i| r.list_get(i)));
                Ok(List(list))
            }
            (l, r) => failed(format!(
                "no matching overload for _+_ ({}, {})",
                l.type_name(),
                r.type_name()
            )),
        }
    }

    fn index(&mut self, coll: &Val<'a>, key: &Val<'a>) -> R<'a> {
        if coll.list_len().is_some() {
            let i = match key {
                Val::Int(i) => usize::try_from(*i).ok(),
                Val::Uint(u) => usize::try_from(*u).ok(),
                Val::Double(d) if d.fract() == 0.0 && *d >= 0.0 => Some(*d as usize),
                other => {
                    return failed(format!(
                        "a list index must be a number, not a {}",
                        other.type_name()
                    ));
                }
            };
            return match i.and_then(|i| coll.list_get(i)) {
                Some(v) => Ok(v),
                None => failed("list index out of range"),
            };
        }
        if coll.map_len().is_some() {
            return match self.map_get(coll, key)? {
                Some(v) => Ok(v),
                None => failed("no such key (in an index)"),
            };
        }
        failed(format!("cannot index a {}", coll.type_name()))
    }

    fn map_get(&mut self, map: &Val<'a>, key: &Val<'a>) -> Result<Option<Val<'a>>, EvalError> {
        match map {
            Val::JMap(m) => Ok(match key {
                Val::Str(s) => m.get(&**s).map(json),
                _ => None,
            }),
            Val::Map(m) => {
                for (k, v) in m.iter() {
                    self.step(1)?;
                    if self.eq(k, key)? {
                        return Ok(Some(v.clone()));
                    }
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// CEL equality: numbers across types, lists and maps element by element (each
    /// element a step), values of different types unequal.
    fn eq(&mut self, a: &Val<'a>, b: &Val<'a>) -> Result<bool, EvalError> {
        use Val::*;
        self.step(1)?;
        match (a, b) {
            (Null, Null) => Ok(true),
            (Bool(x), Bool(y)) => Ok(x == y),
            (Str(x), Str(y)) => {
                if x.len() != y.len() {
                    return Ok(false);
                }
                self.scan(x.len())?;
                Ok(**x == **y)
            }
            (Bytes(x), Bytes(y)) => Ok(x == y),
            (Error(e), _) | (_, Error(e)) => Err(EvalError::Failed(e.clone())),
            (x, y) if x.list_len().is_some() && y.list_len().is_some() => {
                let n = x.list_len().unwrap_or(0);
                if n != y.list_len().unwrap_or(0) {
                    return Ok(false);
                }
                for i in 0..n {
                    let (p, q) = (x.list_get(i), y.list_get(i));
                    if !self.eq(&p.unwrap_or(Null), &q.unwrap_or(Null))? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            (x, y) if x.map_len().is_some() && y.map_len().is_some() => {
                if x.map_len() != y.map_len() {
                    return Ok(false);
                }
                match x {
                    JMap(m) => {
                        let m: &'a serde_json::Map<String, Value> = m;
                        for (k, v) in m {
                            let key = Str(self::Str::B(k));
                            match self.map_get(y, &key)? {
                                Some(w) if self.eq(&json(v), &w)? => {}
                                _ => return Ok(false),
                            }
                        }
                    }
                    Map(m) => {
                        let m = Rc::clone(m);
                        for (k, v) in m.iter() {
                            match self.map_get(y, k)? {
                                Some(w) if self.eq(v, &w)? => {}
                                _ => return Ok(false),
                            }
                        }
                    }
                    _ => {}
                }
                Ok(true)
            }
            (x, y) => Ok(num_cmp(x, y).flatten() == Some(std::cmp::Ordering::Equal)),
        }
    }

    /// The compiled `pattern`, shared: a `Regex` clone would start its match caches
    /// afresh (about 100 µs a match in a debug build), an `Arc` keeps them.
    fn regex(&mut self, pattern: &str) -> Result<Arc<regex::Regex>, EvalError> {
        let cached = self.regexes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(re) = cached.get(pattern) {
            return Ok(re.clone());
        }
        drop(cached);
        self.alloc(2 * REGEX_SIZE as u64 + pattern.len() as u64)?;
        self.scan(pattern.len())?;
        let re = Arc::new(build_regex(pattern).or_else(failed)?);
        let mut cache = self.regexes.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() < REGEX_CACHE {
            cache.insert(pattern.to_string(), re.clone());
        }
        Ok(re)
    }

    fn convert(&mut self, to: &str, v: Val<'a>) -> R<'a> {
        use Val::*;
        let cannot = |v: &Val| failed(format!("cannot convert a {} to {to}", v.type_name()));
        let built = |s: String| Val::Str(self::Str::O(Rc::from(s)));
        match (to, &v) {
            ("dyn", _) => Ok(v),
            ("int", Int(_)) | ("uint", Uint(_)) | ("double", Double(_)) => Ok(v),
            ("string", Str(_)) | ("bool", Bool(_)) => Ok(v),
            ("int", Uint(u)) => i64::try_from(*u).map(Int).or_else(|_| overflow()),
            ("int", Double(d)) if d.is_finite() && d.abs() < 9.2e18 => Ok(Int(*d as i64)),
            ("int", Str(s)) => s.parse().map(Int).or_else(|_| cannot(&v)),
            ("uint", Int(i)) => u64::try_from(*i).map(Uint).or_else(|_| overflow()),
            ("uint", Double(d)) if d.is_finite() && *d >= 0.0 && *d < 1.8e19 => Ok(Uint(*d as u64)),
            ("uint", Str(s)) => s.parse().map(Uint).or_else(|_| cannot(&v)),
            ("double", Int(i)) => Ok(Double(*i as f64)),
            ("double", Uint(u)) => Ok(Double(*u as f64)),
            ("double", Str(s)) => s.parse().map(Double).or_else(|_| cannot(&v)),
            ("string", Int(_) | Uint(_) | Double(_) | Bool(_)) => {
                self.alloc(32)?;
                Ok(built(match &v {
                    Int(i) => i.to_string(),
                    Uint(u) => u.to_string(),
                    Double(d) => d.to_string(),
                    Bool(b) => b.to_string(),
                    _ => String::new(),
                }))
            }
            ("string", Bytes(b)) => {
                self.alloc(b.len() as u64)?;
                match std::str::from_utf8(b) {
                    Ok(s) => Ok(built(s.to_string())),
                    Err(_) => cannot(&v),
                }
            }
            ("bool", Str(s)) => match &**s {
                "true" | "True" | "TRUE" | "t" | "1" => Ok(Bool(true)),
                "false" | "False" | "FALSE" | "f" | "0" => Ok(Bool(false)),
                _ => cannot(&v),
            },
            _ => cannot(&v),
        }
    }
}

fn overflow<'a>() -> R<'a> {
    failed("integer overflow")
}

fn arith<'a>(name: &str, a: &Val<'a>, b: &Val<'a>) -> Option<R<'a>> {
    use Val::*;
    let zero = || failed("division by zero");
    Some(match (a, b) {
        (Int(x), Int(y)) => {
            let (x, y) = (*x, *y);
            if matches!(name, op::DIVIDE | op::MODULO) && y == 0 {
                return Some(zero());
            }
            let r = match name {
                op::SUBSTRACT => x.checked_sub(y),
                op::MULTIPLY => x.checked_mul(y),
                op::DIVIDE => x.checked_div(y),
                _ => x.checked_rem(y),
            };
            r.map(Int).map_or_else(overflow, Ok)
        }
        (Uint(x), Uint(y)) => {
            let (x, y) = (*x, *y);
            if matches!(name, op::DIVIDE | op::MODULO) && y == 0 {
                return Some(zero());
            }
            let r = match name {
                op::SUBSTRACT => x.checked_sub(y),
                op::MULTIPLY => x.checked_mul(y),
                op::DIVIDE => x.checked_div(y),
                _ => x.checked_rem(y),
            };
            r.map(Uint).map_or_else(overflow, Ok)
        }
        (Double(x), Double(y)) => match name {
            op::SUBSTRACT => Ok(Double(x - y)),
            op::MULTIPLY => Ok(Double(x * y)),
            op::DIVIDE => Ok(Double(x / y)),
            _ => return None,
        },
        _ => return None,
    })
}

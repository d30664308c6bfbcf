//! The walk over the expression: literals, identifiers, selection, the macros'
//! comprehensions and calls, each node charged a step before it is evaluated.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators as op};

use super::value::{Str, Val, json};
use super::{Ev, EvalError, MAX_BYTES, MAX_DEPTH, MAX_STEPS, R, SCAN_BYTES, SLOT, Stop, failed};

impl<'a> Ev<'a, '_> {
    /// Charges `n` steps; stops past the budget or once interrupted.
    pub(super) fn step(&mut self, n: u64) -> Result<(), EvalError> {
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
    pub(super) fn alloc(&mut self, n: u64) -> Result<(), EvalError> {
        self.spent.bytes = self.spent.bytes.saturating_add(n);
        if self.spent.bytes > MAX_BYTES {
            return Err(EvalError::Stopped(Stop::Budget));
        }
        Ok(())
    }

    /// Charges a scan of `len` bytes.
    pub(super) fn scan(&mut self, len: usize) -> Result<(), EvalError> {
        self.step(1 + len as u64 / SCAN_BYTES)
    }

    pub(super) fn eval(&mut self, e: &'a IdedExpr) -> R<'a> {
        self.step(1)?;
        if self.depth >= MAX_DEPTH {
            return failed("the expression nests too deeply");
        }
        self.depth += 1;
        let r = self.eval_inner(e);
        self.depth -= 1;
        r
    }

    pub(super) fn eval_inner(&mut self, e: &'a IdedExpr) -> R<'a> {
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

    pub(super) fn lookup(&mut self, name: &str) -> R<'a> {
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
    pub(super) fn take_accumulator(&mut self, name: &str) -> Option<Val<'a>> {
        let slot = self.vars.iter_mut().rev().find(|(n, _)| *n == name)?;
        Some(std::mem::replace(&mut slot.1, Val::Null))
    }

    pub(super) fn select(&mut self, operand: Val<'a>, field: &str, test: bool) -> R<'a> {
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

    pub(super) fn comprehension(&mut self, c: &'a cel::common::ast::ComprehensionExpr) -> R<'a> {
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

    pub(super) fn bool_of(
        &mut self,
        e: &'a IdedExpr,
    ) -> Result<Result<bool, EvalError>, EvalError> {
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

    pub(super) fn call(&mut self, call: &'a cel::common::ast::CallExpr) -> R<'a> {
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
}

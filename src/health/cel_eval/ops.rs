//! Arithmetic, `+` (numbers, strings, lists), indexing and equality: the operations whose
//! cost grows with their operands, charged by length before they run.

use std::rc::Rc;

use cel::common::ast::operators as op;
use serde_json::Value;

use super::value::{Str, Val, json, num_cmp};
use super::{Ev, EvalError, R, SLOT, failed};

impl<'a> Ev<'a, '_> {
    pub(super) fn add(&mut self, l: Val<'a>, r: Val<'a>) -> R<'a> {
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

    pub(super) fn index(&mut self, coll: &Val<'a>, key: &Val<'a>) -> R<'a> {
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

    pub(super) fn map_get(
        &mut self,
        map: &Val<'a>,
        key: &Val<'a>,
    ) -> Result<Option<Val<'a>>, EvalError> {
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
    pub(super) fn eq(&mut self, a: &Val<'a>, b: &Val<'a>) -> Result<bool, EvalError> {
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
}

pub(super) fn overflow<'a>() -> R<'a> {
    failed("integer overflow")
}

pub(super) fn arith<'a>(name: &str, a: &Val<'a>, b: &Val<'a>) -> Option<R<'a>> {
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

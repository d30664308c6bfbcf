//! The operators and functions a call applies (`!`, `==`, `<`, `in`, `size`, `contains`,
//! `matches`, the conversions, ...), and the regular expressions `matches` compiles, each
//! within the evaluation's budget.

use std::rc::Rc;
use std::sync::Arc;

use cel::common::ast::operators as op;

use super::ops::{arith, overflow};
use super::value::{Str, Val, num_cmp};
use super::{Ev, EvalError, R, REGEX_CACHE, REGEX_SIZE, build_regex, failed};

impl<'a> Ev<'a, '_> {
    /// Applies an operator; anything else is a function ([`Ev::function`]).
    pub(super) fn apply(&mut self, name: &str, vals: Vec<Val<'a>>) -> R<'a> {
        use Val::*;
        match name {
            op::LOGICAL_NOT => match vals.as_slice() {
                [Bool(b)] => Ok(Bool(!b)),
                v => no_overload(name, v),
            },
            op::EQUALS | op::NOT_EQUALS => {
                arity(name, &vals, 2)?;
                let eq = self.eq(&vals[0], &vals[1])?;
                Ok(Bool(eq == (name == op::EQUALS)))
            }
            op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS => {
                arity(name, &vals, 2)?;
                let ord = match (&vals[0], &vals[1]) {
                    (Str(a), Str(b)) => {
                        self.scan(a.len().min(b.len()))?;
                        Some(a.cmp(b))
                    }
                    (Bool(a), Bool(b)) => Some(a.cmp(b)),
                    (Bytes(a), Bytes(b)) => Some(a.cmp(b)),
                    (a, b) => match num_cmp(a, b) {
                        Some(o) => o,
                        None => return no_overload(name, &vals),
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
                arity(name, &vals, 2)?;
                arith(name, &vals[0], &vals[1]).unwrap_or_else(|| no_overload(name, &vals))
            }
            op::NEGATE => match vals.as_slice() {
                [Int(i)] => i.checked_neg().map(Int).map_or_else(overflow, Ok),
                [Double(d)] => Ok(Double(-d)),
                v => no_overload(name, v),
            },
            op::INDEX => {
                arity(name, &vals, 2)?;
                self.index(&vals[0], &vals[1])
            }
            op::IN => {
                arity(name, &vals, 2)?;
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
                no_overload(name, &vals)
            }
            _ => self.function(name, vals),
        }
    }

    /// Applies a function: `size`, the string functions, `matches`, the conversions.
    fn function(&mut self, name: &str, vals: Vec<Val<'a>>) -> R<'a> {
        use Val::*;
        match name {
            "size" => match vals.as_slice() {
                [Str(s)] => {
                    self.scan(s.len())?;
                    Ok(Int(s.chars().count() as i64))
                }
                [Bytes(b)] => Ok(Int(b.len() as i64)),
                [v] => match v.list_len().or(v.map_len()) {
                    Some(n) => Ok(Int(n as i64)),
                    None => no_overload(name, &vals),
                },
                v => no_overload(name, v),
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
                v => no_overload(name, v),
            },
            "matches" => match vals.as_slice() {
                [Str(s), Str(p)] => {
                    let re = self.regex(p)?;
                    self.scan(s.len())?;
                    Ok(Bool(re.is_match(s)))
                }
                v => no_overload(name, v),
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
                v => no_overload(name, v),
            },
            "int" | "uint" | "double" | "string" | "bool" | "dyn" => {
                arity(name, &vals, 1)?;
                self.convert(name, vals.into_iter().next().unwrap_or(Null))
            }
            _ => failed(format!(
                "function {name} is not supported in health expressions"
            )),
        }
    }

    /// The compiled `pattern`, shared: a `Regex` clone would start its match caches
    /// afresh (about 100 µs a match in a debug build), an `Arc` keeps them.
    pub(super) fn regex(&mut self, pattern: &str) -> Result<Arc<regex::Regex>, EvalError> {
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

    pub(super) fn convert(&mut self, to: &str, v: Val<'a>) -> R<'a> {
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

/// `Ok` when `name` was given `n` arguments.
fn arity(name: &str, vals: &[Val], n: usize) -> Result<(), EvalError> {
    if vals.len() == n {
        Ok(())
    } else {
        failed(format!("{name} takes {} arguments, not {}", n, vals.len()))
    }
}

/// The error of a call whose arguments' types `name` does not take.
fn no_overload<'a>(name: &str, vals: &[Val]) -> R<'a> {
    let types: Vec<&str> = vals.iter().map(Val::type_name).collect();
    failed(format!(
        "no matching overload for {name} ({})",
        types.join(", ")
    ))
}

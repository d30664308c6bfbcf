//! CEL values over borrowed JSON: what an evaluation reads from the object without copying
//! it, and what it builds (charged to its byte budget by the evaluator).

use std::rc::Rc;

use serde_json::{Map, Value};

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

pub(super) fn json<'a>(v: &'a Value) -> Val<'a> {
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
    pub(super) fn type_name(&self) -> &'static str {
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

    pub(super) fn list_len(&self) -> Option<usize> {
        match self {
            Val::List(l) => Some(l.len()),
            Val::JList(l) => Some(l.len()),
            _ => None,
        }
    }

    pub(super) fn list_get(&self, i: usize) -> Option<Val<'a>> {
        match self {
            Val::List(l) => l.get(i).cloned(),
            Val::JList(l) => l.get(i).map(json),
            _ => None,
        }
    }

    pub(super) fn map_len(&self) -> Option<usize> {
        match self {
            Val::Map(m) => Some(m.len()),
            Val::JMap(m) => Some(m.len()),
            _ => None,
        }
    }
}

/// Numbers of any of CEL's three types, compared as numbers.
pub(super) fn num_cmp(a: &Val, b: &Val) -> Option<Option<std::cmp::Ordering>> {
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

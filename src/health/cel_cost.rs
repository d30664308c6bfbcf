//! A bound on what one `healthCheckExprs` evaluation may cost, decided before it runs.
//!
//! The expressions are tenant input and run inside the synchronous core, on a worker every
//! tenant shares. CEL has no loops or recursion of its own, so an expression's cost is a
//! polynomial in the sizes of the collections it walks: each comprehension (`all`,
//! `exists`, `map`, `filter`, …) multiplies its body by the length of its range, `in`
//! walks a list, and the string scans (`contains`, `matches`, …) walk a string. This module
//! estimates that polynomial over the object about to be judged, from its longest list or
//! map and its longest string, and refuses the evaluation when the estimate is over
//! [`MAX_COST`]. Nesting deeper than [`MAX_LOOP_DEPTH`] is refused when the expression is
//! compiled: even small objects make those too expensive.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

/// Estimated steps one evaluation may take: the per-call limit Kubernetes gives CEL in
/// CRD validation rules, so an expression that is fine there is fine here.
pub(super) const MAX_COST: u64 = 1_000_000;

/// Comprehensions (and list walks) nested deeper than this are refused at compile time.
pub(super) const MAX_LOOP_DEPTH: u32 = 3;

/// The sizes an evaluation's cost depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Widths {
    /// Entries of the longest list or map in the object.
    pub items: u64,
    /// Bytes of the longest string in the object.
    pub chars: u64,
}

impl Widths {
    /// Measures `obj` (depth-bounded by the JSON parser that made it).
    pub(super) fn of(obj: &Value) -> Widths {
        let mut w = Widths { items: 1, chars: 1 };
        measure(obj, &mut w);
        w
    }
}

fn measure(v: &Value, w: &mut Widths) {
    match v {
        Value::String(s) => w.chars = w.chars.max(s.len() as u64),
        Value::Array(a) => {
            w.items = w.items.max(a.len() as u64);
            a.iter().for_each(|x| measure(x, w));
        }
        Value::Object(m) => {
            w.items = w.items.max(m.len() as u64);
            for (k, x) in m {
                w.chars = w.chars.max(k.len() as u64);
                measure(x, w);
            }
        }
        _ => {}
    }
}

/// How deeply loops nest in `e` (a comprehension's body counts one deeper; `in` walks one
/// more list).
pub(super) fn loop_depth(e: &IdedExpr) -> u32 {
    match &e.expr {
        Expr::Comprehension(c) => {
            let body = loop_depth(&c.loop_cond).max(loop_depth(&c.loop_step)) + 1;
            [&c.iter_range, &c.accu_init, &c.result]
                .into_iter()
                .map(loop_depth)
                .fold(body, u32::max)
        }
        Expr::Call(call) => {
            let own = u32::from(call.func_name == cel::common::ast::operators::IN);
            children(e).map(loop_depth).max().unwrap_or(0) + own
        }
        _ => children(e).map(loop_depth).max().unwrap_or(0),
    }
}

/// The estimated steps of evaluating `e` over an object of widths `w` (saturating).
pub(super) fn cost(e: &IdedExpr, w: Widths) -> u64 {
    match &e.expr {
        Expr::Comprehension(c) => {
            let once = [&c.iter_range, &c.accu_init, &c.result]
                .into_iter()
                .map(|x| cost(x, w))
                .fold(1u64, u64::saturating_add);
            let body = cost(&c.loop_cond, w).saturating_add(cost(&c.loop_step, w));
            once.saturating_add(w.items.saturating_mul(body))
        }
        Expr::Call(call) => {
            let own = match call.func_name.as_str() {
                cel::common::ast::operators::IN => w.items,
                "contains" | "startsWith" | "endsWith" | "matches" => w.chars,
                _ => 1,
            };
            children(e)
                .map(|x| cost(x, w))
                .fold(own, u64::saturating_add)
        }
        _ => children(e)
            .map(|x| cost(x, w))
            .fold(1u64, u64::saturating_add),
    }
}

/// The direct sub-expressions of `e` (comprehensions are handled by their callers).
fn children(e: &IdedExpr) -> Box<dyn Iterator<Item = &IdedExpr> + '_> {
    match &e.expr {
        Expr::Call(c) => Box::new(c.target.as_deref().into_iter().chain(c.args.iter())),
        Expr::List(l) => Box::new(l.elements.iter()),
        Expr::Select(s) => Box::new(std::iter::once(s.operand.as_ref())),
        Expr::Map(m) => Box::new(m.entries.iter().flat_map(|en| entry(&en.expr))),
        Expr::Struct(s) => Box::new(s.entries.iter().flat_map(|en| entry(&en.expr))),
        Expr::Comprehension(c) => Box::new(
            [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter(),
        ),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Box::new(std::iter::empty()),
    }
}

fn entry(e: &EntryExpr) -> Vec<&IdedExpr> {
    match e {
        EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
        EntryExpr::StructField(f) => vec![&f.value],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Program;

    fn p(src: &str) -> Program {
        Program::compile(src).expect("compiles")
    }

    #[test]
    fn loops_nest_as_written() {
        let depth = |s: &str| loop_depth(p(s).expression());
        assert_eq!(depth("status.phase == 'Running'"), 0);
        assert_eq!(
            depth("status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"),
            1
        );
        assert_eq!(depth("self.a.all(x, self.b.exists(y, x == y))"), 2);
        assert_eq!(depth("self.a.all(x, x in self.b)"), 2);
        // A range computed by a loop runs before the outer loop, not inside it.
        assert_eq!(depth("self.a.map(x, x).all(y, y > 0)"), 1);
    }

    #[test]
    fn cost_grows_with_the_object_and_the_nesting() {
        let small = Widths {
            items: 10,
            chars: 100,
        };
        let big = Widths {
            items: 100_000,
            chars: 100,
        };
        let simple = p("status.conditions.exists(c, c.type == 'Ready')");
        let nested = p("self.a.all(x, self.a.all(y, x == y))");
        assert!(cost(simple.expression(), small) < 100);
        assert!(cost(simple.expression(), big) < MAX_COST);
        assert!(cost(nested.expression(), small) < 10_000);
        assert!(cost(nested.expression(), big) > MAX_COST);
        let scan = p("self.a.exists(x, self.s.contains(x))");
        let long = Widths {
            items: 10_000,
            chars: 1_000_000,
        };
        assert!(cost(scan.expression(), long) > MAX_COST);
    }

    #[test]
    fn widths_are_the_longest_collection_and_string() {
        let w = Widths::of(&serde_json::json!({
            "a": [1, 2, 3, {"k": "abcdefgh"}], "b": {"x": 1}
        }));
        assert_eq!(w, Widths { items: 4, chars: 8 });
    }
}

//! What the shipped alert rules and dashboard ask Prometheus for: every expression parsed
//! with a real PromQL parser (`promql-parser`), and the metric names, label names and label
//! values it selects or groups by, to hold against an exposition the operator serves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, LabelModifier, VectorSelector};
use serde_json::Value;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// The canonical files (the Helm chart's), and their kustomize copies.
pub const RULES: &str = "deploy/helm/opm-operator/files/alert-rules.yaml";
pub const DASHBOARD: &str = "deploy/helm/opm-operator/files/dashboard.json";
pub const RULES_COPY: &str = "deploy/components/monitoring/alert-rules.yaml";
pub const DASHBOARD_COPY: &str = "deploy/components/monitoring/dashboard.json";

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The PrometheusRule as JSON.
pub fn rules_doc() -> Value {
    serde_saphyr::from_str(&read(RULES)).unwrap_or_else(|e| panic!("{RULES}: {e}"))
}

/// Every alert rule: (alert name, the rule as JSON).
pub fn alert_rules() -> Vec<(String, Value)> {
    let doc = rules_doc();
    let groups = doc["spec"]["groups"].as_array().expect("spec.groups");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .map(|r| (r["alert"].as_str().expect("alert").to_string(), r.clone()))
        .collect()
}

/// Every query of the dashboard: (panel title, expression). Grafana's `$__rate_interval`
/// stands for a range; it becomes `5m` so the expression parses as Prometheus would run it.
pub fn dashboard_exprs() -> Vec<(String, String)> {
    let doc: Value = serde_json::from_str(&read(DASHBOARD)).expect("dashboard JSON");
    let mut out = Vec::new();
    for panel in doc["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or_default();
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().expect("target expr");
            out.push((title.to_string(), expr.replace("$__rate_interval", "5m")));
        }
    }
    out
}

/// Every expression of both files, named.
pub fn all_exprs() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = alert_rules()
        .into_iter()
        .map(|(name, r)| (name, r["expr"].as_str().expect("expr").to_string()))
        .collect();
    out.extend(
        dashboard_exprs()
            .into_iter()
            .map(|(t, e)| (format!("dashboard panel {t:?}"), e)),
    );
    out
}

/// What one expression asks for.
#[derive(Debug, Default)]
pub struct Uses {
    /// Metric name → (label name → the literal values it is matched against; empty for a
    /// label only read or matched with a pattern).
    pub metrics: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Labels named by `by`, `without`, `on`, `ignoring` and `group_left/right`.
    pub grouping: BTreeSet<String>,
}

impl Uses {
    /// Parses `expr` (the parser's message on failure).
    pub fn of(expr: &str) -> Result<Uses, String> {
        let ast = parser::parse(expr)?;
        let mut uses = Uses::default();
        uses.walk(&ast);
        Ok(uses)
    }

    fn selector(&mut self, vs: &VectorSelector) {
        let name = vs.name.clone().unwrap_or_default();
        let labels = self.metrics.entry(name).or_default();
        let all = vs
            .matchers
            .matchers
            .iter()
            .chain(vs.matchers.or_matchers.iter().flatten());
        for m in all.filter(|m| m.name != "__name__") {
            let values = labels.entry(m.name.clone()).or_default();
            // Literal values, also of a plain alternation (`a|b`): those must be served.
            let literal = match &m.op {
                MatchOp::Equal | MatchOp::NotEqual => Some(m.value.as_str()),
                MatchOp::Re(_) | MatchOp::NotRe(_)
                    if m.value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_|".contains(c)) =>
                {
                    Some(m.value.as_str())
                }
                _ => None,
            };
            if let Some(v) = literal {
                values.extend(v.split('|').filter(|v| !v.is_empty()).map(String::from));
            }
        }
    }

    fn modifier(&mut self, m: &LabelModifier) {
        self.grouping.extend(m.labels().labels.iter().cloned());
    }

    fn walk(&mut self, e: &Expr) {
        match e {
            Expr::Aggregate(a) => {
                if let Some(m) = &a.modifier {
                    self.modifier(m);
                }
                if let Some(p) = &a.param {
                    self.walk(p);
                }
                self.walk(&a.expr);
            }
            Expr::Unary(u) => self.walk(&u.expr),
            Expr::Binary(b) => {
                if let Some(m) = &b.modifier {
                    if let Some(on) = &m.matching {
                        self.modifier(on);
                    }
                    if let Some(l) = m.card.labels() {
                        self.grouping.extend(l.labels.iter().cloned());
                    }
                }
                self.walk(&b.lhs);
                self.walk(&b.rhs);
            }
            Expr::Paren(p) => self.walk(&p.expr),
            Expr::Subquery(s) => self.walk(&s.expr),
            Expr::VectorSelector(vs) => self.selector(vs),
            Expr::MatrixSelector(ms) => self.selector(&ms.vs),
            Expr::Call(c) => c.args.args.iter().for_each(|a| self.walk(a)),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
        }
    }
}

/// Series Prometheus makes itself for every target, whatever it scrapes: `up`, with the
/// job both installs' ServiceMonitors name (`opm-operator`, from the metrics Service's
/// `app.kubernetes.io/name`; `tests/monitoring.rs` checks the rendered installs) and an
/// instance of any value.
pub const SYNTHETIC: [(&str, &[SyntheticLabel]); 1] =
    [("up", &[("job", Some("opm-operator")), ("instance", None)])];

/// A label of a [`SYNTHETIC`] series and its one known value, if it has one.
pub type SyntheticLabel = (&'static str, Option<&'static str>);

/// Metric name → label name → values, from a Prometheus text exposition.
pub fn served(text: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let labels = out.entry(name.to_string()).or_default();
        if let Some(body) = rest
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
            .map(|(b, _)| b)
        {
            // Our label values never hold `",` (names, kinds, outcomes): a plain split works.
            for pair in body.split("\",").filter(|p| !p.is_empty()) {
                if let Some((k, v)) = pair.split_once("=\"") {
                    labels
                        .entry(k.to_string())
                        .or_default()
                        .insert(v.trim_end_matches('"').to_string());
                }
            }
        }
    }
    for (name, labels) in SYNTHETIC {
        let entry = out.entry(name.to_string()).or_default();
        for (l, value) in labels {
            entry
                .entry(l.to_string())
                .or_default()
                .extend(value.map(String::from));
        }
    }
    out
}

/// Labels Prometheus attaches to every series it scrapes (the target's), whatever the
/// exposition holds; `namespace` is not among them here: with `honorLabels` the series' own
/// (the release's) is kept.
pub const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// What `uses` (of the expression `what`) asks for that `served` lacks: metric names,
/// label names, grouping labels and, when `values` is set, literal label values.
pub fn missing(
    what: &str,
    uses: &Uses,
    served: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    values: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut available: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
    for (metric, labels) in &uses.metrics {
        let Some(have) = served.get(metric) else {
            out.push(format!("{what}: metric {metric} is not served"));
            continue;
        };
        available.extend(have.keys().map(String::as_str));
        for (label, wanted) in labels {
            let Some(have_values) = have.get(label) else {
                if !TARGET_LABELS.contains(&label.as_str()) {
                    out.push(format!("{what}: {metric} has no label {label}"));
                }
                continue;
            };
            if values {
                for v in wanted.difference(have_values) {
                    out.push(format!(
                        "{what}: {metric}{{{label}=\"{v}\"}} is never served"
                    ));
                }
            }
        }
    }
    for label in &uses.grouping {
        if !available.contains(label.as_str()) {
            out.push(format!(
                "{what}: groups by {label}, which none of its metrics carries"
            ));
        }
    }
    out
}

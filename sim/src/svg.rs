//! The timeline as an SVG picture: one row per release, each attempt a mark on a shared
//! time axis coloured by outcome, and a grey bar from each attempt to its requeue so
//! backoff gaps are visible. Hand-written text: the picture is simple and a fixed format
//! keeps it byte-identical across runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use opm_core::object::ReleaseKey;

/// Rows drawn at most; a 10 000-release picture would be unreadable and huge.
pub const MAX_ROWS: usize = 500;

const LEFT: f64 = 300.0;
const PLOT: f64 = 1000.0;
const TOP: f64 = 50.0;
const ROW: f64 = 20.0;

/// Outcome label → colour, in legend order.
const COLOURS: [(&str, &str); 6] = [
    ("applied", "#2e7d32"),
    ("applied_and_pruned", "#1565c0"),
    ("no_op", "#9e9e9e"),
    ("failed_transient", "#ef6c00"),
    ("failed_stalled", "#c62828"),
    ("none", "#000000"),
];

fn colour(outcome: &str) -> &'static str {
    COLOURS
        .iter()
        .find(|(o, _)| *o == outcome)
        .map_or("#000000", |(_, c)| c)
}

struct Mark {
    at_ms: u64,
    requeue_ms: Option<u64>,
    outcome: &'static str,
    title: String,
}

/// Collects attempts while the simulation runs.
pub struct Picture {
    total_ms: u64,
    rows: BTreeMap<ReleaseKey, Vec<Mark>>,
    skipped: BTreeSet<ReleaseKey>,
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

impl Picture {
    pub fn new(total_ms: u64) -> Self {
        Self {
            total_ms: total_ms.max(1),
            rows: BTreeMap::new(),
            skipped: BTreeSet::new(),
        }
    }

    pub fn add(
        &mut self,
        key: &ReleaseKey,
        at_ms: u64,
        requeue_ms: Option<u64>,
        outcome: &'static str,
        title: String,
    ) {
        if !self.rows.contains_key(key) && self.rows.len() >= MAX_ROWS {
            self.skipped.insert(key.clone());
            return;
        }
        self.rows.entry(key.clone()).or_default().push(Mark {
            at_ms,
            requeue_ms,
            outcome,
            title,
        });
    }

    fn x(&self, ms: u64) -> f64 {
        LEFT + (ms.min(self.total_ms) as f64) / (self.total_ms as f64) * PLOT
    }

    /// A tick step giving at most ~12 ticks.
    fn tick_ms(&self) -> u64 {
        const STEPS: [u64; 14] = [
            10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 604800,
        ];
        STEPS
            .iter()
            .map(|s| s * 1000)
            .find(|s| self.total_ms / s <= 12)
            .unwrap_or(604_800_000)
    }

    pub fn render(&self) -> String {
        let rows = self.rows.len();
        let height = TOP + rows as f64 * ROW + 70.0;
        let width = LEFT + PLOT + 40.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="10" y="18" font-size="14">opm-sim timeline: {rows} releases, one mark per attempt, grey bars are requeue waits</text>"#
        );
        // Time axis.
        let bottom = TOP + rows as f64 * ROW;
        let step = self.tick_ms();
        let mut t = 0;
        while t <= self.total_ms {
            let x = self.x(t);
            let secs = t / 1000;
            let _ = writeln!(
                s,
                r##"<line class="tick" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#e0e0e0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">+{:02}:{:02}</text>"##,
                TOP - 8.0,
                TOP - 12.0,
                secs / 3600,
                (secs / 60) % 60
            );
            t += step;
        }
        for (i, (key, marks)) in self.rows.iter().enumerate() {
            let y = TOP + i as f64 * ROW;
            let mid = y + ROW / 2.0;
            let _ = writeln!(
                s,
                r#"<g class="release"><text x="10" y="{:.1}">{} {}</text>"#,
                mid + 4.0,
                key.kind.as_str(),
                esc(&key.display())
            );
            for m in marks {
                if let Some(r) = m.requeue_ms {
                    let _ = writeln!(
                        s,
                        r##"<line class="wait" x1="{:.1}" y1="{mid:.1}" x2="{:.1}" y2="{mid:.1}" stroke="#bdbdbd" stroke-width="2"/>"##,
                        self.x(m.at_ms),
                        self.x(m.at_ms.saturating_add(r))
                    );
                }
            }
            for m in marks {
                let _ = writeln!(
                    s,
                    r#"<rect class="attempt" data-outcome="{}" x="{:.1}" y="{:.1}" width="3" height="14" fill="{}"><title>{}</title></rect>"#,
                    m.outcome,
                    self.x(m.at_ms) - 1.5,
                    y + 3.0,
                    colour(m.outcome),
                    esc(&m.title)
                );
            }
            let _ = writeln!(s, "</g>");
        }
        // Legend.
        let ly = bottom + 30.0;
        let _ = writeln!(s, r#"<g class="legend">"#);
        let mut x = 10.0;
        for (o, c) in COLOURS {
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{c}"/><text x="{:.1}" y="{:.1}">{o}</text>"#,
                ly - 9.0,
                x + 14.0,
                ly
            );
            x += 14.0 + 8.0 * o.len() as f64 + 16.0;
        }
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#bdbdbd" stroke-width="2"/><text x="{:.1}" y="{ly:.1}">requeue wait</text>"##,
            ly - 4.0,
            x + 20.0,
            ly - 4.0,
            x + 24.0
        );
        if !self.skipped.is_empty() {
            let _ = writeln!(
                s,
                r#"<text x="10" y="{:.1}">{} more releases not drawn (at most {MAX_ROWS} rows)</text>"#,
                ly + 20.0,
                self.skipped.len()
            );
        }
        let _ = writeln!(s, "</g>\n</svg>");
        s
    }
}

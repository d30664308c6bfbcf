"""The benchmark's outputs from results.json: a markdown table and an SVG chart of releases
Ready over time. Kept apart from bench/run so a table can be re-made from saved results:
`python3 bench/report.py bench/results/results.json`."""

import json
import sys

COLORS = {"flux": "#d62728", "opm-rel": "#1f77b4", "opm-mr": "#2ca02c", "opm-opm": "#9467bd"}
DASH = {4: "", 10: "6,3"}


def verbs(req):
    return ", ".join(f"{k} {v}" for k, v in req["by_verb"].items()) or "—"


def ratio(a, b):
    return f"{a / b:.2f}" if b else "—"


# The tables in the order they are printed; results from before tables existed were all
# measured at the tuned client limits, apply-only.
ORDER = ["apply-shipped", "apply-tuned", "healthy-shipped", "healthy-tuned", "opm"]
LEGACY = "apply-tuned"


def table_of(run):
    return run.get("table", LEGACY)


def svg_name(table, n):
    """The headline table keeps the old chart names (ready-<N>.svg)."""
    return f"ready-{n}.svg" if table == "apply-shipped" else f"ready-{n}-{table}.svg"


def limits_text(meta, table, runs):
    if table.endswith("-tuned"):
        text = f"both controllers at client QPS {meta['qps']} / burst {meta['burst']}"
        if meta.get("opm_args"):
            text += ", opm-operator also with " + " ".join(f"`{a}`" for a in meta["opm_args"])
        return text
    shipped = {}
    for run in runs:
        for s in run["systems"]:
            lim = s.get("client_limits") or {}
            shipped[s["system"] if s["system"] == "flux" else "opm"] = lim
    parts = []
    for key, name in (("flux", "Flux kustomize-controller"), ("opm", "opm-operator")):
        if key in shipped:
            lim = shipped[key]
            qps = "unlimited (0)" if lim.get("qps") == 0 else lim.get("qps")
            parts.append(f"{name} QPS {qps} / burst {lim.get('burst')}")
    text = "every controller with its shipped client defaults (no flag: " + "; ".join(parts) + ")"
    if meta.get("opm_args"):
        text += ", opm-operator also with " + " ".join(f"`{a}`" for a in meta["opm_args"])
    return text


def title(meta, table, runs):
    if table == "opm":
        return ("### OPM module against plain module (issue 32)\n\nThe same four objects per release "
                "(Deployment, Service, ConfigMap, ServiceAccount): N ModuleReleases of the plain "
                "`example.com/modules/web@v0`, then N of the OPM module `example.com/opm/web@v1` rendered "
                "through the Platform `cluster` (catalog `opmodel.dev/catalogs/opm@v2` v2.0.0-test.2), each "
                "release with its own values, in one world; apply-only (`wait: false`); "
                f"{limits_text(meta, table, runs)}.")
    variant = table.split("-")[0]
    what = {
        "apply": "apply-only (`wait: false`): Ready once the API server accepted every object",
        "healthy": "converge to healthy (`wait: true`, Flux's `spec.wait` and our health wait) on a cluster "
                   "with the real kube-controller-manager, kube-scheduler and kwok nodes (their clients at "
                   f"QPS {meta.get('cluster_qps', '?')} / burst {meta.get('cluster_burst', '?')}): Ready once "
                   "every Deployment rolled out",
    }[variant]
    head = {"apply-shipped": "Headline: as shipped", "apply-tuned": "Tuned",
            "healthy-shipped": "Converge to healthy, as shipped", "healthy-tuned": "Converge to healthy, tuned"}[table]
    return f"### {head}\n\n{what}; {limits_text(meta, table, runs)}."


def markdown(doc):
    meta = doc["meta"]
    out = [f"Run {meta['date']} on {meta['cpus']} CPUs (a machine shared with other work); command "
           f"`{meta['command']}`.", ""]
    tables = sorted({table_of(r) for r in doc["runs"]}, key=lambda t: ORDER.index(t) if t in ORDER else 99)
    for table in tables:
        runs = [r for r in doc["runs"] if table_of(r) == table]
        out += [title(meta, table, runs), ""]
        out += table_rows(runs)
        out.append("")
        if table == "opm":
            out += opm_rows(runs)
            out.append("")
        for run in runs:
            if run.get("note"):
                out += [f"N = {run['releases']}, concurrency {run['concurrency']}: {run['note']}.", ""]
    out += cpu_table(doc)
    out += notes()
    return "\n".join(out)


def table_rows(runs):
    out = [
        "| N | conc. | system | all Ready (s) | objects/s | peak RSS (MiB) | requests to converge | "
        "re-reconcile all (s) | requests / unchanged release | object writes | ours/Flux time | "
        "ours/Flux RSS | ours/ceiling |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        flux = next((s for s in run["systems"] if s["system"] == "flux"), None)
        ceil = run["ceiling"]["per_second"]
        for s in run["systems"]:
            ours = s["system"] != "flux"
            n = run["releases"]
            conv_s = s["converge_seconds"]
            again_s = s["rereconcile_seconds"]
            flux_conv = flux["converge_seconds"] if flux else None
            out.append("| " + " | ".join([
                str(n), str(run["concurrency"]), s["label"],
                f"{conv_s:.1f}" if conv_s else f"not all: {s.get('converged', '?')}/{n}",
                f"{s['objects_per_second']:.0f}" if s["objects_per_second"] else "—",
                f"{s['peak_rss_mib']:.0f}",
                f"{s['converge_requests']['total']} ({verbs(s['converge_requests'])})",
                f"{again_s:.2f}" if again_s else f"not all: {s.get('rereconcile_handled', 0)}/{n}",
                f"{s['rereconcile_requests_per_release']:.1f} ({verbs(s['rereconcile_requests'])})"
                if s["rereconcile_requests_per_release"] is not None else "—",
                str(s["rereconcile_requests"]["object_writes"]),
                ratio(conv_s, flux_conv) if ours and conv_s and flux_conv else "—",
                ratio(s["peak_rss_mib"], flux["peak_rss_mib"]) if ours and flux else "—",
                f"{s['objects_per_second'] / ceil:.2f}" if ceil and s["objects_per_second"] else "—",
            ]) + " |")
        out.append(f"| {run['releases']} | {run['concurrency']} | API server ceiling (SSA of ConfigMaps) | — | "
                   f"{ceil:.0f} | — | — | — | — | — | — | — | 1.00 |")
    return out


def cue_text(counts):
    if counts is None:
        return "—"
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def opm_rows(runs):
    """The OPM table's comparison: time against the plain row, and every `cue` the
    operator started (converge: how far batching got; re-reconcile of unchanged releases:
    a NoOp, so none)."""
    out = [
        "| N | conc. | system | all Ready (s) | OPM / plain time | controller CPU converge (s) | "
        "`cue` runs to converge | releases per render run | re-reconcile all (s) | "
        "`cue` runs in the re-reconcile (NoOp) | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        plain = next((s for s in run["systems"] if s["system"] == "opm-mr"), None)
        for s in run["systems"]:
            n = run["releases"]
            conv = s["converge_seconds"]
            runs_c = s.get("cue_runs_converge")
            # Runs that rendered releases (the Platform's own evaluation left out).
            exports = sum((runs_c or {}).get(k, 0) for k in ("export", "export-opm", "export-opm-batch"))
            out.append("| " + " | ".join([
                str(n), str(run["concurrency"]), s["label"],
                f"{conv:.1f}" if conv else f"not all: {s.get('converged', '?')}/{n}",
                ratio(conv, plain["converge_seconds"]) if s["system"] == "opm-opm" and plain and conv
                and plain["converge_seconds"] else "—",
                f"{s['cpu_seconds_converge']['controller']:.1f}",
                cue_text(runs_c),
                f"{n / exports:.1f}" if exports else "—",
                f"{s['rereconcile_seconds']:.1f}" if s["rereconcile_seconds"] else
                f"not all: {s.get('rereconcile_handled', 0)}/{n}",
                cue_text(s.get("cue_runs_rereconcile")),
                f"{s['peak_rss_mib']:.0f}",
            ]) + " |")
    return out


def cpu_table(doc):
    out = []
    cpu_rows = [(run, s) for run in doc["runs"] for s in run["systems"] if "cpu_seconds_converge" in s]
    if cpu_rows:
        out += [
            "Where the CPU went (seconds of CPU time, from /proc: the controller process itself, not the `cue` "
            "runs it starts; the API server process includes etcd):",
            "",
            "| table | N | conc. | system | converge: controller | converge: API server | "
            "re-reconcile: controller | re-reconcile: API server | re-reconcile: trigger (s) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for run, s in cpu_rows:
            conv, again = s["cpu_seconds_converge"], s["cpu_seconds_rereconcile"]
            out.append("| " + " | ".join([
                table_of(run), str(run["releases"]), str(run["concurrency"]), s["label"],
                f"{conv['controller']:.1f}", f"{conv['apiserver']:.1f}",
                f"{again['controller']:.1f}", f"{again['apiserver']:.1f}",
                f"{s['rereconcile_trigger_seconds']:.1f}" if s["rereconcile_trigger_seconds"] else "—",
            ]) + " |")
        out.append("")
    return out


def notes():
    return [
        "Requests are resource requests counted by the API server (`apiserver_request_total`, "
        "discovery and other non-resource URLs left out); the harness's own requests (its watch, "
        "and the annotation that asks for the re-reconcile: one LIST and N PATCHes) are subtracted. "
        "Object writes are non-dry-run writes to anything but the release objects, their status "
        "and Events. ours/ceiling compares objects applied per second with the API server's own "
        "server-side applies per second of plain ConfigMaps at the same concurrency. The re-reconcile "
        "clock starts before the trigger (the harness annotating every release, N PATCHes) and "
        "includes it; its own duration is the trigger column. In the healthy tables the API server "
        "also serves kube-controller-manager, kube-scheduler and kwok; their requests are counted too.",
        "",
    ]


def svg(doc, n, table="apply-shipped", width=720, height=420):
    runs = [r for r in doc["runs"] if r["releases"] == n and table_of(r) == table]
    tmax = max((s["ready_curve"][-1] for r in runs for s in r["systems"] if s["ready_curve"]), default=1.0)
    tmax = max(tmax * 1.05, 1.0)
    left, right, top, bottom = 60, 200, 30, 50
    pw, ph = width - left - right, height - top - bottom

    def x(t):
        return left + pw * t / tmax

    def y(k):
        return top + ph * (1 - k / n)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{left}" y="18" font-size="14">Releases Ready over time, {table}, N = {n}</text>',
             f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>']
    for i in range(6):
        t = tmax * i / 5
        parts.append(f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{t:.0f}</text>')
        k = n * i / 5
        parts.append(f'<text x="{left - 6}" y="{y(k) + 4:.1f}" text-anchor="end">{k:.0f}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">seconds since the controller started</text>')
    legend = 0
    for r in runs:
        for s in r["systems"]:
            pts = [(0.0, 0)] + [(t, i + 1) for i, t in enumerate(s["ready_curve"])]
            d = " ".join(f"{x(t):.1f},{y(k):.1f}" for t, k in pts)
            color = COLORS.get(s["system"], "black")
            dash = DASH.get(r["concurrency"], "2,2")
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                         f'stroke-dasharray="{dash}" points="{d}"/>')
            ly = top + 10 + legend * 18
            parts.append(f'<line x1="{left + pw + 10}" y1="{ly}" x2="{left + pw + 40}" y2="{ly}" '
                         f'stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
            parts.append(f'<text x="{left + pw + 45}" y="{ly + 4}">{s["system"]} c={r["concurrency"]} '
                         + (f'({s["converge_seconds"]:.0f}s)' if s["converge_seconds"] else f'(not all: {s.get("converged", "?")})')
                         + '</text>')
            legend += 1
    parts.append("</svg>\n")
    return "\n".join(parts)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(markdown(json.load(f)))

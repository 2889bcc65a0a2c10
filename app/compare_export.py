"""A comparison that can leave the board: Markdown for a pull request, CSV of the pairs.

Both are built from the same dict as the page and `/api/compare` (already masked by the
caller), so what is pasted says what the page says. Trace text is escaped for Markdown
(a task id or a critic's reason cannot open a link, a table cell or an HTML tag) and
defused for spreadsheets (a cell never starts with `=`, `+`, `-` or `@`).
"""

from __future__ import annotations

import csv
import io
from typing import Any, Optional
from urllib.parse import urlencode

from .compare import MEASURES
from .compare_flags import FLAG_LABELS
from .urls import run_path
from .words import plural

# Enough to keep trace text inert: no emphasis, code, link, table cell, strike or HTML tag
# can start inside it (parentheses only matter after a `]`, which is escaped).
_MD_SPECIAL = "\\`*_[]<>|~"


def md(text: Any) -> str:
    """Trace text as inert Markdown: special characters escaped, line breaks as spaces."""
    s = "" if text is None else str(text)
    s = " ".join(s.split())
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in s)


def _pct(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:.0f}%"


def _num(name: str, v: Any) -> str:
    if v is None:
        return "—"
    if name in ("agent_s", "elapsed_s"):
        return f"{v:,.2f} s"
    if name in ("cost_usd", "agent_cost_usd"):
        return f"${v:,.4f}"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def _verdict(side: dict[str, Any]) -> str:
    v = side.get("verdict") or "no verdict"
    if side.get("early_stopped"):
        return f"{v} (stopped early)"
    return v


def _run_link(base: str, run_id: str) -> str:
    return base + run_path(run_id)


def markdown(data: dict[str, Any], *, base_url: str, label_a: str, label_b: str, description: str) -> str:
    """The summary a reviewer pastes: headline, confusion matrix, the test, savings with
    intervals, replicates, and every disagreeing or flagged pair with links."""
    s = data["summary"]
    base = base_url.rstrip("/")
    la, lb = md(label_a), md(label_b)
    out = [f"## {la} vs {lb}", "", f"_{md(description)}_", "", f"**{md(data['headline'])}**", ""]
    c = s["confusion"]
    out += [f"| | {lb} pass | {lb} fail |", "|---|---:|---:|",
            f"| **{la} pass** | {c['pass_pass']} | {c['pass_fail']} |",
            f"| **{la} fail** | {c['fail_pass']} | {c['fail_fail']} |", ""]
    if s["verdict_agreement"]["total"] and (s["errors"]["a"] or s["errors"]["b"]):  # no matrix, no "fail" to include them
        out += [f"Fail includes error (no gradeable attempt): {s['errors']['a']} in {la}, {s['errors']['b']} in {lb}.", ""]
    out += [md(s["mcnemar"]["reading"]), ""]
    out += [f"| measure | {la} | {lb} | saved | 95% CI |", "|---|---:|---:|---:|---|"]
    for name, _col, label in MEASURES:
        m = s[name]
        if m["a"] is None:
            continue
        ci = "—" if m.get("low") is None else f"{_pct(m['low'])} to {_pct(m['high'])}"
        note = f" ({plural(m['missing'], 'pair')} without it)" if m["missing"] else ""
        if m.get("lower_bound"):
            note += f" ({plural(m['lower_bound'], 'pair')} with a cost that is a lower bound)"
        out.append(f"| {label}{note} | {_num(name, m['a'])} | {_num(name, m['b'])} | {_pct(m['saved_pct'])} | {ci} |")
    out.append("")
    r = data.get("replicates") or {}
    if r:
        with_reps = r["tasks_with_replicates"]
        line = (f"Replicates: {plural(r['tasks'], 'task')}, {plural(s['paired'], 'paired run')}; "
                f"{plural(with_reps, 'task')} with replicates.")
        if r["flaky_a"] or r["flaky_b"]:
            wf = r["agreement_without_flaky"]
            line += (f" Flaky (verdict varies between replicates): {len(r['flaky_a'])} in {la}, "
                     f"{len(r['flaky_b'])} in {lb}; without their {r['flaky_pairs']} pairs, "
                     f"verdicts agree on {wf['agree']} of {wf['total']}.")
        out += [line, ""]
    shown = [p for p in data["pairs"] if p["agree"] is False or p.get("flags")]
    if shown:
        out += [f"### Disagreeing or flagged pairs ({len(shown)})", "",
                f"| task | replicate | {la} | {lb} | flags | links |", "|---|---:|---|---|---|---|"]
        for p in shown:
            flags = "; ".join(md(f["text"]) for f in p.get("flags") or []) or "—"
            pair_url = f"{base}/pair?{urlencode({'a': p['a']['run_id'], 'b': p['b']['run_id']})}"
            links = (f"[{la}]({_run_link(base, p['a']['run_id'])}) · [{lb}]({_run_link(base, p['b']['run_id'])}) · "
                     f"[side by side]({pair_url})")
            mark = "disagree: " if p["agree"] is False else ""
            out.append(f"| {md(p['task_id'])} | {p['replicate']} | {mark}{md(_verdict(p['a']))} | "
                       f"{md(_verdict(p['b']))} | {flags} | {links} |")
        out.append("")
    return "\n".join(out)


CSV_COLUMNS = ["task_id", "replicate", "agree", "flags",
               "a_run_id", "a_verdict", "a_stop_reason", "a_early_stop_reason", "b_run_id", "b_verdict", "b_stop_reason",
               *[f"{side}_{name}" for name, _c, _l in MEASURES for side in ("a", "b")],
               *[f"saved_pct_{name}" for name, _c, _l in MEASURES]]


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value  # a spreadsheet would run it as a formula
    return "" if value is None else value


def csv_text(data: dict[str, Any]) -> str:
    """The per-pair table, one row per pair, every measure of both sides."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for p in data["pairs"]:
        a, b = p["a"], p["b"]
        row = [p["task_id"], p["replicate"], {True: "yes", False: "no"}.get(p["agree"], "not graded"),
               "; ".join(FLAG_LABELS.get(f["kind"], f["kind"]) for f in p.get("flags") or []),
               a["run_id"], a["verdict"], a["stop_reason"], a.get("early_stop_reason"),
               b["run_id"], b["verdict"], b["stop_reason"]]
        row += [side[name] for name, _c, _l in MEASURES for side in (a, b)]
        row += [p["saved_pct"][name] for name, _c, _l in MEASURES]
        w.writerow([_cell(v) for v in row])
    return buf.getvalue()

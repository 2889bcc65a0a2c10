"""The lab's result as Markdown (`/api/lab?format=md`, `qita whatif --md`), from the same
dict as the page; trace text made inert with compare's escaping (`compare_export.md`)."""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import urlencode

from ..compare import MEASURES
from ..compare_export import md
from ..urls import run_path
from ..words import plural


def _pct(x: Optional[float]) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _num(name: str, v: Any) -> str:
    if v is None:
        return "—"
    if name in ("agent_s", "elapsed_s"):
        return f"{v:,.2f} s"
    if name in ("cost_usd", "agent_cost_usd"):
        return f"${v:,.4f}"
    return f"{v:,.0f}"


def markdown(data: dict[str, Any], *, base_url: str) -> str:
    """Headline, policy, false passes with their bounds, savings with intervals, the
    validation against the recorded early-stop runs, the recommended policy, and every
    run whose verdict the policy flips."""
    s, base = data["summary"], base_url.rstrip("/")
    query = urlencode({**data["set"]["filters"], **data.get("policy_params", {})}, doseq=True)
    fp, ff = s["false_passes"], s["false_fails"]
    lines = [f"### Policy lab (simulated): {md(data['policy']['label'])}", "",
             f"Runs: {md(data['set']['description'])} — {data['set']['simulated']} full runs simulated. "
             f"[Open in the lab]({base}/lab?{query})", "", f"**{md(data['headline'])}**", "",
             f"- false passes (simulated pass, recorded fail): {fp['count']} of {fp['of']}"
             + (f" ({_pct(fp['rate'])}, 95% CI {_pct(fp['low'])}–{_pct(fp['high'])}; at most {_pct(fp['upper'])}, "
                "one-sided 95%)" if fp["rate"] is not None else ""),
             f"- false fails (simulated fail, recorded pass): {ff['count']} of {ff['of']}",
             f"- runs cut: {s['cut']} of {s['paired']}"
             + "".join(f"; {md(reason)} {n}" for reason, n in s["cut_by"].items()),
             f"- {md(s['mcnemar']['reading'])}", "",
             "| measure | simulated | recorded | saved | 95% CI |", "|---|---:|---:|---:|---:|"]
    for name, _col, label in MEASURES:
        m = s[name]
        if m["a"] is None:
            continue
        ci = f"{m['low']:.0f}% to {m['high']:.0f}%" if m["low"] is not None else "—"
        saved = "—" if m["saved_pct"] is None else f"{m['saved_pct']:.0f}%"
        # Totals over the runs that recorded the measure: say how many did not (as compare does).
        note = f" ({plural(m['missing'], 'run')} without it)" if m.get("missing") else ""
        lines.append(f"| {label}{note} | {_num(name, m['a'])} | {_num(name, m['b'])} | {saved} | {ci} |")
    v = data.get("validation")
    if v:
        differ = v["paired"] - v["matched"]
        why = f" (of the {differ} that differ, {v['explained']} explained by the traces)" if differ else ""
        lines += ["", f"**Against what {md(v['variant'])} really did:** {v['matched']} of {plural(v['paired'], 'pair')} "
                      f"match in stop step and verdict{why}."]
        for r in v["pairs"]:
            if not r["match"]:
                lines.append(f"- {md(r['task_id'])}#{r['replicate']}: recorded step {r['recorded']['stop_step']} "
                             f"{md(r['recorded']['verdict'])}, simulated step {r['simulated']['stop_step']} "
                             f"{md(r['simulated']['verdict'])} — {md(r['why']['text'] if r['why'] else '')}")
    f = data.get("frontier")
    if f and f.get("recommended"):
        best = f["recommended"]
        lines += ["", f"**Recommended policy:** {md(best['label'])} — saves {best['saved_pct']:.0f}% of the "
                      f"{md(f['measure'])} with no false pass in {best['graded']} graded runs; false-pass rate at most "
                      f"{_pct(best['false_passes']['upper'])} (one-sided 95%)."]
    flipped = [p for p in data["pairs"] if p["agree"] is False]
    if flipped:
        lines += ["", "| run | simulated | recorded | stopped at | why |", "|---|---|---|---|---|"]
        for p in flipped:
            link = base + run_path(p["run_id"])
            at = f"step {p['sim']['stop_step']}" if p["sim"]["cut"] else "its end"
            lines.append(f"| [{md(p['task_id'])}#{p['replicate']}]({link}) | {md(p['a']['verdict'])} | "
                         f"{md(p['b']['verdict'])} | {at} | {md(p['sim']['verdict_reason'] or '')} |")
    return "\n".join(lines) + "\n"

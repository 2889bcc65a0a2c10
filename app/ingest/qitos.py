"""Reader for QitOS run folders: `manifest.json`, `steps.jsonl`, `events.jsonl`.

Each folder becomes one v1 run. The manifest gives `run_start` (task, model, budget)
and, once the run completed, `run_end` (stop reason, final result, token usage,
failure report). QitOS's legacy stop reason `final_result` means `final`; the
original spelling stays in the record. A manifest that still says `running` while no
END event was written is a run that died: it has no `run_end`, so the board shows it
running until silent, then abandoned — never finished, never successful.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import orjson

from .sources import Source, join_label, key_for, read_json_document, text_name

PEEK_LINES = 8
PEEK_LINE_BYTES = 4 * 1024 * 1024


def is_qitos_folder(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "manifest.json")) and (
        os.path.isfile(os.path.join(folder, "steps.jsonl")) or os.path.isfile(os.path.join(folder, "events.jsonl"))
    )


def _peek_events(path: str) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(run_id, first ts, objective) from the first few events, read with a size cap."""
    run_id = ts = objective = None
    try:
        with open(path, "rb") as fh:
            for _ in range(PEEK_LINES):
                line = fh.readline(PEEK_LINE_BYTES)
                if not line:
                    break
                try:
                    ev = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(ev, dict):
                    continue
                if run_id is None and isinstance(ev.get("run_id"), str):
                    run_id = ev["run_id"]
                if ts is None and isinstance(ev.get("ts"), str):
                    ts = ev["ts"]
                payload = ev.get("payload")
                if objective is None and ev.get("phase") == "INIT" and isinstance(payload, dict):
                    task = payload.get("task")
                    if isinstance(task, str):
                        objective = task
    except OSError:
        pass
    return run_id, ts, objective


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _criteria(task_meta: Any, task_result: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """QitOS success criteria as v1 specs and results (best effort: their shape varies)."""
    specs: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for i, spec in enumerate(_dig(task_meta, "success_criteria") or []):
        if isinstance(spec, dict):
            cid = str(spec.get("id") or spec.get("name") or f"criterion-{i + 1}")
            specs.append({"id": cid, "type": spec.get("type"), "description": spec.get("description"),
                          "stop_when": None, "gating": spec.get("gating", True) is not False,
                          "pass_threshold": (spec.get("pass_threshold", 0.9)
                                             if isinstance(spec.get("pass_threshold"), (int, float)) else 0.9)})
        elif isinstance(spec, str):
            specs.append({"id": f"criterion-{i + 1}", "type": None, "description": spec})
    for i, res in enumerate(_dig(task_result, "criteria") or []):
        if not isinstance(res, dict):
            continue
        cid = str(res.get("id") or res.get("name") or (specs[i]["id"] if i < len(specs) else f"criterion-{i + 1}"))
        score = res.get("score")
        passed = res.get("passed", res.get("success"))
        results.append({"id": cid,
                        "score": float(score) if isinstance(score, (int, float)) and 0 <= score <= 1 else None,
                        "passed": passed if isinstance(passed, bool) else None,
                        "details": res})
    return specs, results


def qitos_sources(folder: str, label: str, key_prefix: Optional[str]) -> list[Source]:
    """The sources of one QitOS run folder, in the order they are read."""
    manifest_path = os.path.join(folder, "manifest.json")
    steps_path = os.path.join(folder, "steps.jsonl")
    events_path = os.path.join(folder, "events.jsonl")
    peek_run_id, first_ts, objective = _peek_events(events_path) if os.path.isfile(events_path) else (None, None, None)
    manifest, manifest_error = read_json_document(manifest_path)
    if not isinstance(manifest, dict):
        if manifest_error is None:
            manifest_error = "not a JSON object"
        manifest = {}
    run_id = manifest.get("run_id") if isinstance(manifest.get("run_id"), str) and manifest.get("run_id") else None
    run_id = (run_id or peek_run_id or os.path.basename(os.path.normpath(folder)) or "qitos-run")[:200]
    status = manifest.get("status")
    state: dict[str, Any] = {"seen_end": None, "end_written": False, "manifest_read": False}

    def produce() -> tuple[list[dict[str, Any]], list[tuple[Optional[int], str]]]:
        errors: list[tuple[Optional[int], str]] = []
        if manifest_error:
            errors.append((None, f"manifest unreadable ({manifest_error}); steps and events are still read"))
        summary = manifest.get("summary") if isinstance(manifest.get("summary"), dict) else {}
        task_meta = summary.get("task_meta") if isinstance(summary.get("task_meta"), dict) else {}
        task_result = summary.get("task_result") if isinstance(summary.get("task_result"), dict) else {}
        run_meta = summary.get("run_meta") if isinstance(summary.get("run_meta"), dict) else {}
        budget = task_meta.get("budget") if isinstance(task_meta.get("budget"), dict) else {}
        specs, results = _criteria(task_meta, task_result)
        model = manifest.get("model_id") or run_meta.get("model_name")
        meta = {k: manifest.get(k) for k in ("schema_version", "prompt_hash", "run_config_hash", "seed", "updated_at")
                if k in manifest}
        meta["qitos_status"] = status
        if "success" in task_result:
            meta["qitos_success"] = task_result.get("success")
        if run_meta:
            meta["run_meta"] = run_meta
        if task_meta.get("env_spec") is not None:
            meta["env_spec"] = task_meta.get("env_spec")
        start = {
            "type": "run_start",
            "run_id": run_id,
            "schema": "qita.trace/1",
            "ts": first_ts,
            "task_id": task_meta.get("task_id") if isinstance(task_meta.get("task_id"), str) else run_id,
            "objective": objective,
            "agent": run_meta.get("parser") if isinstance(run_meta.get("parser"), str) else "qitos",
            "model": model if isinstance(model, str) else None,
            "budget": {k: budget.get(k) for k in ("max_steps", "max_runtime_seconds", "max_tokens")},
            "criteria": specs,
            "tags": ["qitos"],
            "metadata": meta,
        }
        records: list[dict[str, Any]] = [start]
        for res in results:
            records.append({"type": "criterion", "run_id": run_id, **res})
        if status in ("completed", "failed", "error") and summary:
            records.append(_run_end(run_id, manifest, summary, task_result, status))
            state["end_written"] = True
        state["manifest_read"] = True
        return records, errors

    def step_transform(value: dict[str, Any], line: int) -> list[dict[str, Any]]:
        rec = dict(value)
        step = rec.pop("step_id", rec.get("step"))
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError("missing or invalid field 'step_id'")
        rec.pop("run_id", None)
        rec.update({"type": "step", "run_id": run_id, "step": step})
        outs = rec.get("critic_outputs")
        if isinstance(outs, list):
            rec["critic_outputs"] = [o if not isinstance(o, dict) or "critic" in o else {"critic": None, **o} for o in outs]
        return [rec]

    def event_transform(value: dict[str, Any], line: int) -> list[dict[str, Any]]:
        rec = dict(value)
        step = rec.pop("step_id", rec.get("step"))
        rec.update({"type": "event", "run_id": run_id, "step": step if isinstance(step, int) and not isinstance(step, bool) else None})
        if not isinstance(rec.get("phase"), str):
            raise ValueError("missing or invalid field 'phase'")
        if rec["phase"] == "END":
            state["seen_end"] = rec
        return [rec]

    def finish() -> list[dict[str, Any]]:
        # The run ended but the manifest gave no summary to say how (or it still says
        # `running` while an END event was written): end it from what there is.
        end = state["seen_end"]
        terminal = status in ("completed", "failed", "error")
        if state["end_written"] or (end is None and not (terminal and state["manifest_read"])):
            return []
        payload = end.get("payload") if end is not None and isinstance(end.get("payload"), dict) else {}
        return [{"type": "run_end", "run_id": run_id, "ts": end.get("ts") if end is not None else None,
                 "status": status if terminal else "completed",
                 "stop_reason": payload.get("stop_reason") if isinstance(payload.get("stop_reason"), str) else None,
                 "final_result": payload.get("final_result") if isinstance(payload.get("final_result"), str) else None}]

    sources = [Source(key=key_for(manifest_path, join_label(label, "manifest.json"), key_prefix),
                      label=join_label(label, "manifest.json"), path=manifest_path, kind="qitos_manifest",
                      source_format="qitos", produce=produce, size=_size(manifest_path))]
    if os.path.isfile(steps_path):
        sources.append(Source(key=key_for(steps_path, join_label(label, "steps.jsonl"), key_prefix),
                              label=join_label(label, "steps.jsonl"), path=steps_path, kind="qitos_steps",
                              source_format="qitos", transform=step_transform, size=_size(steps_path)))
    if os.path.isfile(events_path):
        sources.append(Source(key=key_for(events_path, join_label(label, "events.jsonl"), key_prefix),
                              label=join_label(label, "events.jsonl"), path=events_path, kind="qitos_events",
                              source_format="qitos", transform=event_transform, finish=finish, size=_size(events_path)))
    # The three files are one source of one run (the overwrite rule, app.ingest.overwrite).
    origin = key_for(folder, label, key_prefix)
    for src in sources:
        src.origin, src.origin_label = text_name(origin), text_name(label)
    return sources


def _run_end(run_id: str, manifest: dict[str, Any], summary: dict[str, Any], task_result: dict[str, Any],
             status: str) -> dict[str, Any]:
    metrics = task_result.get("metrics") if isinstance(task_result.get("metrics"), dict) else {}
    tokens = summary.get("token_usage")
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        tokens = metrics.get("token_usage") if isinstance(metrics.get("token_usage"), int) else None
    elapsed = metrics.get("elapsed_seconds")
    steps = summary.get("steps")
    final = summary.get("final_result")
    reason = summary.get("stop_reason")
    return {
        "type": "run_end",
        "run_id": run_id,
        "ts": manifest.get("updated_at") if isinstance(manifest.get("updated_at"), str) else None,
        "status": status,
        "stop_reason": reason if isinstance(reason, str) else None,
        "final_result": final if isinstance(final, str) or final is None else orjson.dumps(final).decode(),
        "verdict": None,
        "steps": steps if isinstance(steps, int) and not isinstance(steps, bool) else None,
        # no count in the summary: the steps' tokens are summed (a null total would say unknown)
        "tokens": {"input": None, "output": None, "total": tokens} if tokens is not None else None,
        "elapsed_s": float(elapsed) if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) else None,
        "failure_report": summary.get("failure_report") if isinstance(summary.get("failure_report"), dict) else None,
    }


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0



"""Reader for coder_eval results folders: `<run_id>/<variant_id>/<task_id>/<NN>/task.json`, `run.json` at the root.

Each task.json becomes one v1 run: experiment = the results run id, variant =
variant_id, replicate = NN, task_id as written. Its success_criteria_results become
criterion specs and results (id `"type: description"`, the same spelling coder_eval
uses for `early_stop.armed_criteria`, so armed criteria are recognised); a non-null
early_stop becomes the early_stop record (and arms those criteria); iterations become
steps with their tool calls; duration, token usage and cost become the run totals.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from .sources import Source, join_label, key_for, read_json_document, register_folder_reader

MAX_TASK_JSON = 512 * 1024 * 1024
PASS = {"pass", "passed", "success", "succeeded", "ok"}
FAIL = {"fail", "failed", "failure"}


def is_coder_eval_folder(folder: str) -> bool:
    """A folder with run.json whose subfolders hold variant/task/NN/task.json."""
    if not os.path.isfile(os.path.join(folder, "run.json")):
        return False
    return any(True for _ in _task_files(folder, limit=1))


def _dirs(folder: str) -> list[os.DirEntry]:
    try:
        return sorted((e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
    except OSError:
        return []


def _task_files(root: str, limit: Optional[int] = None):
    found = 0
    for variant in _dirs(root):
        for task in _dirs(variant.path):
            for rep in _dirs(task.path):
                path = os.path.join(rep.path, "task.json")
                if os.path.isfile(path):
                    yield variant.name, task.name, rep.name, path
                    found += 1
                    if limit and found >= limit:
                        return


def _num(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def criterion_id(ctype: Any, description: Any) -> str:
    """coder_eval names a criterion `"type: description"` (as in early_stop.armed_criteria)."""
    t, d = _str(ctype), _str(description)
    if t and d:
        return f"{t}: {d}"
    return t or d or "criterion"


def _tokens(value: Any) -> dict[str, Optional[int]]:
    if _int(value) is not None:
        return {"input": None, "output": None, "total": value}
    if not isinstance(value, dict):
        return {"input": None, "output": None, "total": None}

    def pick(*keys: str) -> Optional[int]:
        for k in keys:
            if _int(value.get(k)) is not None:
                return value[k]
        return None

    tin = pick("input", "input_tokens", "prompt_tokens")
    tout = pick("output", "output_tokens", "completion_tokens")
    total = pick("total", "total_tokens")
    if total is None and (tin is not None or tout is not None):
        total = (tin or 0) + (tout or 0) + (pick("cache_read_input_tokens") or 0) + (pick("cache_creation_input_tokens") or 0)
    return {"input": tin, "output": tout, "total": total}


def _cost(task: dict[str, Any]) -> Optional[float]:
    for key in ("cost_usd", "cost", "total_cost_usd"):
        value = task.get(key)
        if _num(value) is not None:
            return _num(value)
        if isinstance(value, dict):
            for k in ("total_usd", "usd", "total", "total_cost_usd"):
                if _num(value.get(k)) is not None:
                    return _num(value.get(k))
    return None


def _tool_calls(iteration: dict[str, Any]) -> list[dict[str, Any]]:
    calls = iteration.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _step(run_id: str, index: int, iteration: Any) -> dict[str, Any]:
    it = iteration if isinstance(iteration, dict) else {"value": iteration}
    calls = _tool_calls(it)
    actions = [{"name": str(c.get("name") or c.get("tool_name") or c.get("tool") or "tool"),
                "args": c.get("input", c.get("args", c.get("arguments")))} for c in calls]
    results = [c.get("output", c.get("result")) for c in calls]
    text = _str(it.get("text")) or _str(it.get("content")) or _str(it.get("message")) or _str(it.get("thought"))
    step = {"type": "step", "run_id": run_id, "step": index, "actions": actions, "action_results": results,
            "decision": {"mode": "tool" if actions else "text", "rationale": text, "actions": actions},
            "tool_invocations": [{"tool_name": a["name"], "status": c.get("status"), "error": c.get("error"),
                                  "latency_ms": _num(c.get("latency_ms"))} for a, c in zip(actions, calls)],
            "observation": {k: v for k, v in it.items() if k != "tool_calls"}}
    usage = it.get("token_usage", it.get("usage", it.get("tokens")))
    if usage is not None:
        step["tokens"] = _tokens(usage)
    duration = _num(it.get("duration_seconds"))
    if duration is not None:
        step["duration_s"] = duration
    return step


def task_records(task: dict[str, Any], *, experiment: str, variant: str, task_name: str, replicate: int,
                 run_meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The v1 records of one task.json."""
    task_id = _str(task.get("task_id")) or task_name
    variant = _str(task.get("variant_id")) or variant
    run_id = f"{experiment}/{variant}/{task_id}/{replicate:02d}"[:200]
    early = task.get("early_stop") if isinstance(task.get("early_stop"), dict) else None
    armed = [a for a in (early.get("armed_criteria") or []) if isinstance(a, str)] if early else []
    specs: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for res in task.get("success_criteria_results") or []:
        if not isinstance(res, dict):
            continue
        cid = criterion_id(res.get("criterion_type"), res.get("description"))
        seen[cid] = seen.get(cid, 0) + 1
        if seen[cid] > 1:
            cid = f"{cid} ({seen[cid]})"
        threshold = _num(res.get("pass_threshold"))
        specs.append({"id": cid, "type": _str(res.get("criterion_type")), "description": _str(res.get("description")),
                      "gating": res.get("gating", True) is not False,
                      "pass_threshold": threshold if threshold is not None else 0.9,
                      "stop_when": "decided" if cid in armed else None})
        score = _num(res.get("score"))
        results.append({"type": "criterion", "run_id": run_id, "id": cid,
                        # Kept as written: the store flags a score outside [0, 1] with a warning.
                        "score": score,
                        "details": res.get("details")})
    start = {"type": "run_start", "run_id": run_id, "schema": "qita.trace/1",
             "ts": _str(task.get("started_at")) or _str(run_meta.get("started_at")),
             "task_id": task_id, "experiment": experiment, "variant": variant, "replicate": replicate,
             "objective": _str(task.get("prompt")) or _str(task.get("description")),
             "agent": _str(task.get("agent")) or _str(run_meta.get("agent")) or "coder_eval",
             "model": _str(task.get("model")) or _str(run_meta.get("model")),
             "criteria": specs, "early_stop": {"enabled": bool(early)}, "tags": ["coder_eval"],
             "metadata": {"source": "coder_eval", "final_status": task.get("final_status")}}
    iterations = task.get("iterations") if isinstance(task.get("iterations"), list) else []
    records: list[dict[str, Any]] = [start, *(_step(run_id, i, it) for i, it in enumerate(iterations)), *results]
    if early:
        deciding = criterion_id(early.get("deciding_criterion_type"), early.get("deciding_criterion_description")) \
            if (early.get("deciding_criterion_type") or early.get("deciding_criterion_description")) else None
        tci = _int(early.get("tool_call_index"))
        records.append({"type": "early_stop", "run_id": run_id, "reason": _str(early.get("reason")),
                        "deciding_criterion": deciding, "armed_criteria": armed,
                        "step": _int(early.get("sdk_turn_index")),
                        "tool_call_index": tci if tci is not None and tci >= 1 else None,
                        "elapsed_s": _num(early.get("elapsed_seconds")),
                        "turns_remaining": _int(early.get("turns_remaining_at_stop"))})
    status = (_str(task.get("final_status")) or "").lower()
    errored = status in ("error", "errored", "crashed")
    # Without a final_status the task.json does not say how the run ended: claim nothing.
    records.append({"type": "run_end", "run_id": run_id, "ts": _str(task.get("ended_at")),
                    "status": ("error" if errored else "completed") if status else None,
                    "stop_reason": "early_stop" if early else ("unrecoverable_error" if errored else "final" if status else None),
                    # An errored task did not pass, whatever its criteria scored.
                    "verdict": "pass" if status in PASS else "fail" if status in FAIL or errored else None,
                    "steps": len(iterations),
                    "tokens": _tokens(task.get("token_usage", task.get("usage", task.get("tokens")))),
                    "cost_usd": _cost(task), "elapsed_s": _num(task.get("duration_seconds"))})
    return records


def coder_eval_sources(folder: str, label: str, key_prefix: Optional[str]) -> list[Source]:
    """One whole-document source per task.json."""
    run_json, _err = read_json_document(os.path.join(folder, "run.json"))
    run_meta = run_json if isinstance(run_json, dict) else {}
    experiment = (_str(run_meta.get("run_id")) or os.path.basename(os.path.normpath(folder)) or "coder_eval")[:400]
    sources = []
    for variant, task_name, rep, path in _task_files(folder):
        rel = f"{variant}/{task_name}/{rep}/task.json"
        src_label = join_label(label, rel)

        def produce(path=path, variant=variant, task_name=task_name, rep=rep):
            doc, err = read_json_document(path, MAX_TASK_JSON)
            if err:
                return [], [(None, err)]
            if not isinstance(doc, dict):
                return [], [(None, "task.json is not a JSON object")]
            replicate = int(rep) if rep.isdigit() else 0
            return task_records(doc, experiment=experiment, variant=variant, task_name=task_name,
                                replicate=replicate, run_meta=run_meta), []

        sources.append(Source(key=key_for(path, src_label, key_prefix), label=src_label, path=path, kind="document",
                              source_format="coder_eval", produce=produce, size=os.path.getsize(path)))
    return sources


register_folder_reader(is_coder_eval_folder, coder_eval_sources)

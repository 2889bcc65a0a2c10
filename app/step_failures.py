"""Did a step fail: the one rule the run page's error filter and summaries (app.walk) and
the compare flags' deciding call (app.compare_flags) read.

- A tool invocation failed when it carries an `error` or a failing `status`.
- An action result failed when it carries an `error`, `ok: false`, a failing `status`
  or a non-zero exit code (`exit_code`, `returncode`, `return_code` or `exitCode`).
- A step failed when it ended in `error` itself, or any of its calls failed.

Pure functions over stored records (dicts as the reader kept them).
"""

from __future__ import annotations

import re
from typing import Any, Optional

import orjson

#: Tool-invocation statuses that mean the call did not succeed (compared lower-case).
FAILING_STATUSES = frozenset({"error", "errored", "failed", "failure", "fail", "timeout", "timed_out", "exception",
                              "crashed"})
#: Where a result or invocation keeps its exit code, in the order they are read.
EXIT_CODE_KEYS = ("exit_code", "returncode", "return_code", "exitCode")
#: What a stored step line must hold to be worth parsing for step_errors: an `error` that is
#: not null, `ok: false`, a non-zero `returncode` or a failing `status`. One pass of a
#: regular expression over the text (about 4 ms per 1,000 steps of 2 KB); only the lines it
#: matches are parsed and judged.
MAY_FAIL = re.compile(r'"(?:error"\s*:\s*[^n\s]|ok"\s*:\s*f|'
                      r'(?:returncode|exit_code|return_code|exitCode)"\s*:\s*-?[1-9]|status"\s*:\s*"(?i:'
                      + "|".join(sorted(FAILING_STATUSES)) + ')")')


def is_set(value: Any) -> bool:
    """A value that says something (an `error: null` or `""` says nothing failed)."""
    return value not in (None, "", {}, [], False)


def exit_code(*holders: Any) -> Optional[int]:
    """The first integer exit code among the holders (a result, then its invocation)."""
    for holder in holders:
        if isinstance(holder, dict):
            for key in EXIT_CODE_KEYS:
                code = holder.get(key)
                if isinstance(code, int) and not isinstance(code, bool):
                    return code
    return None


def status_failed(status: Any) -> bool:
    """A status that says the call did not succeed."""
    return isinstance(status, str) and status.lower() in FAILING_STATUSES


def invocation_failed(invocation: Any) -> bool:
    """A tool invocation with an `error` or a failing `status`."""
    return isinstance(invocation, dict) and (is_set(invocation.get("error")) or status_failed(invocation.get("status")))


def result_failed(result: Any) -> bool:
    """An action result with an `error`, `ok: false`, a failing `status` or a non-zero exit code."""
    if not isinstance(result, dict):
        return False
    code = exit_code(result)
    return is_set(result.get("error")) or result.get("ok") is False or status_failed(result.get("status")) \
        or (code is not None and code != 0)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def step_errors(record: Any) -> list[str]:
    """What failed in a step record, as short texts (empty when nothing did)."""
    out: list[str] = []
    if not isinstance(record, dict):
        return out
    if isinstance(record.get("error"), str) and record["error"]:
        out.append(record["error"])  # the step itself ended in error (e.g. the agent crashed)
    invocations = record.get("tool_invocations") if isinstance(record.get("tool_invocations"), list) else []
    for inv in invocations:
        if invocation_failed(inv):
            name = inv.get("tool_name") if isinstance(inv.get("tool_name"), str) else "tool"
            error = inv.get("error")
            out.append(f"{name}: {_text(error) if is_set(error) else 'status ' + str(inv.get('status'))}")
    results = record.get("action_results") if isinstance(record.get("action_results"), list) else []
    for res in results:
        if not result_failed(res):
            continue
        if is_set(res.get("error")):
            out.append(_text(res["error"]))
        elif res.get("ok") is False:
            out.append("action result not ok")
        elif status_failed(res.get("status")) and not exit_code(res):
            out.append(f"action result: status {res['status']}")
        else:
            command = res.get("command") if isinstance(res.get("command"), str) else "command"
            out.append(f"{command}: returncode {exit_code(res)}")
    return out

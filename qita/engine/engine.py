"""The Engine: drives an agent step by step, runs critics and stop criteria, writes the trace.

One step is observe -> decide -> act -> reduce -> critics -> stop check. See
`docs/engine.md` for the rules in prose; the comments here say why a rule is the way it
is, not what the code does.
"""

from __future__ import annotations

import hashlib
import time
import traceback
import uuid
from datetime import datetime, timedelta, timezone
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import orjson

from ..core import AgentState, Decision, RuntimeBudget, Task, ToolCall, Trajectory, Usage
from .critic import CONTINUE, RETRY, STOP, critic_name, effective_action
from ..criteria import Criterion, CriterionResult
from ..early_stop import LiveWatcher, compute_verdict, validate_early_stop
from ..core.errors import StopReason
from .stop_criteria import (
    FinalResultCriteria,
    MaxRuntimeCriteria,
    MaxStepsCriteria,
    MaxTokensCriteria,
    StopCriteria,
)
from ..writer import TraceWriter, dumps_record

DEFAULT_MAX_STEPS = 20

#: Stop reasons that mean the run never got going, rather than finishing or crashing.
_FAILED_REASONS = {StopReason.TASK_VALIDATION_FAILED, StopReason.ENV_CAPABILITY_MISMATCH}


@dataclass
class RunResult:
    """What `Engine.run` returns. `state.stop_reason` is always set."""

    state: Any
    run_id: str
    task: Task
    stop_reason: StopReason
    stop_detail: Optional[str]
    status: str
    final_result: Any
    verdict: str
    steps: int
    tokens: dict[str, int]
    cost_usd: float
    elapsed_s: float
    criteria: dict[str, CriterionResult] = field(default_factory=dict)
    early_stop: Optional[dict[str, Any]] = None
    failure_report: dict[str, Any] = field(default_factory=dict)
    trace_path: Optional[Path] = None

    @property
    def stopped_early(self) -> bool:
        return self.stop_reason == StopReason.EARLY_STOP


def _jsonable(value: Any) -> Any:
    # Snapshots must survive arbitrary agent state; the writer's fallback encoder handles odd objects.
    try:
        return orjson.loads(dumps_record(value))
    except Exception:
        return repr(value)


def _snapshot(state: Any) -> dict[str, Any]:
    if isinstance(state, dict):
        items = state.items()
    elif hasattr(state, "__dict__"):
        items = vars(state).items()
    else:
        return {"value": _jsonable(state)}
    return {k: _jsonable(v) for k, v in items if not str(k).startswith("_") and k != "task"}


def _diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key in list(before) + [k for k in after if k not in before]:
        b, a = before.get(key), after.get(key)
        if b != a:
            out[key] = {"before": b, "after": a}
    return out


def coerce_task(task: Union[str, Task]) -> Task:
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        # A stable id from the text, so the same string task compares across variants.
        digest = hashlib.sha1(task.encode("utf-8")).hexdigest()[:10]
        return Task(id=f"task-{digest}", objective=task)
    raise TypeError(f"task must be a str or a Task, not {type(task).__name__}")


class Engine:
    """Run one agent on tasks with critics, stop criteria, budgets, criteria and a trace.

    `stop_criteria=None` means `[FinalResultCriteria()]`; passing a list replaces it.
    Budgets (`max_steps`, `max_runtime_seconds`, `max_tokens`) are the defaults a
    task's `TaskBudget` overrides field by field. `trace` is a `TraceWriter` for exactly
    one run; `trace_path` makes the engine open a writer per run. With neither, no trace
    is written.
    """

    def __init__(self, agent: Any, critics: Optional[Sequence[Any]] = None,
                 stop_criteria: Optional[Sequence[StopCriteria]] = None, *,
                 max_steps: Optional[int] = None, max_runtime_seconds: Optional[float] = None,
                 max_tokens: Optional[int] = None, criteria: Optional[Sequence[Criterion]] = None,
                 stop_early: bool = False, trace: Optional[TraceWriter] = None,
                 trace_path: Optional[Union[str, Path]] = None, run_id: Optional[str] = None,
                 experiment: Optional[str] = None, variant: Optional[str] = None, replicate: int = 0,
                 tags: Optional[Sequence[str]] = None, metadata: Optional[dict[str, Any]] = None,
                 env: Any = None, model: Optional[str] = None, clock: Optional[Callable[[], float]] = None):
        if trace is not None and trace_path is not None:
            raise ValueError("give either trace or trace_path, not both")
        self.agent = agent
        self.critics = list(critics or [])
        self.stop_criteria = None if stop_criteria is None else list(stop_criteria)
        self.budget = RuntimeBudget(max_steps=DEFAULT_MAX_STEPS if max_steps is None else max_steps,
                                    max_runtime_seconds=max_runtime_seconds, max_tokens=max_tokens)
        self.criteria = list(criteria or [])
        self.stop_early = bool(stop_early)
        self.trace = trace
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self.run_id = run_id
        self.experiment = experiment
        self.variant = variant
        self.replicate = replicate
        self.tags = list(tags or [])
        self.metadata = dict(metadata or {})
        self.env = env
        self.model = model or getattr(agent, "model", None)
        # A monotonic seconds function; the demo passes a simulated one so its runs have
        # realistic durations. Trace timestamps follow it from the real start time.
        self.clock = clock or time.monotonic
        # Fail before the run, not in the middle of it, when early stop cannot work as configured.
        validate_early_stop(self.criteria, self.stop_early)

    # -- helpers ----------------------------------------------------------------------
    def _tools(self) -> dict[str, Callable[..., Any]]:
        tools: dict[str, Callable[..., Any]] = {}
        tools.update(getattr(self.env, "tools", None) or {})
        tools.update(getattr(self.agent, "tools", None) or {})
        return tools

    def _stop_criteria(self) -> list[StopCriteria]:
        return list(self.stop_criteria) if self.stop_criteria is not None else [FinalResultCriteria()]

    @staticmethod
    def _budget_criteria(budget: RuntimeBudget) -> list[StopCriteria]:
        out: list[StopCriteria] = []
        if budget.max_steps is not None:
            out.append(MaxStepsCriteria(budget.max_steps))
        if budget.max_runtime_seconds is not None:
            out.append(MaxRuntimeCriteria(budget.max_runtime_seconds))
        if budget.max_tokens is not None:
            out.append(MaxTokensCriteria(budget.max_tokens))
        return out

    def _observe(self, state: Any, task: Task, step: int, last_results: Optional[list[Any]]) -> Any:
        for source in (self.env, self.agent):
            observe = getattr(source, "observe", None)
            if callable(observe):
                return observe(state, last_results)
        obs: dict[str, Any] = {"task": task.objective, "step": step}
        if last_results is not None:
            obs["last_results"] = last_results
        return obs

    # -- the run ------------------------------------------------------------------------
    def run(self, task: Union[str, Task], **init_kwargs: Any) -> RunResult:
        """Run the agent on `task` (a Task or a plain string) until a stop rule fires."""
        task = coerce_task(task)
        budget = self.budget.apply(task.budget)
        armed = validate_early_stop(self.criteria, self.stop_early)
        stop_criteria = self._stop_criteria()
        budget_criteria = self._budget_criteria(budget)
        for item in [*self.critics, *stop_criteria]:
            reset = getattr(item, "reset", None)
            if callable(reset):
                reset()

        run_id = self.run_id or f"{task.id}-{uuid.uuid4().hex[:8]}"
        writer, own_writer = self.trace, False
        if writer is None and self.trace_path is not None:
            writer, own_writer = TraceWriter(self.trace_path, run_id), True
        if writer is not None:
            run_id = writer.run_id
        run = _Run(self, task, budget, stop_criteria, budget_criteria, armed, writer, run_id)
        try:
            return run.execute(init_kwargs)
        except BaseException as exc:
            run.crash_detail = f"{type(exc).__name__}: {exc}"[:2000]
            raise
        finally:
            # A crash in the engine itself still leaves a finished run in the trace when the
            # process survives long enough to get here; only a hard kill leaves it "running".
            if writer is not None and writer.started and not writer.ended:
                try:
                    writer.run_end(status="error", stop_reason=StopReason.UNRECOVERABLE_ERROR.value,
                                   stop_detail=run.crash_detail or "run interrupted",
                                   steps=run.steps_done, verdict=None,
                                   failure_report={"errors": run.errors or [{"error": run.crash_detail}]})
                except Exception:
                    pass
            if own_writer and writer is not None:
                writer.close()


class _Run:
    """The mutable bookkeeping of one run (kept off the Engine so an Engine can run again)."""

    def __init__(self, engine: Engine, task: Task, budget: RuntimeBudget, stop_criteria: list[StopCriteria],
                 budget_criteria: list[StopCriteria], armed: list[Criterion], writer: Optional[TraceWriter],
                 run_id: str):
        self.e = engine
        self.agent = engine.agent
        self.task = task
        self.budget = budget
        self.stop_criteria = stop_criteria
        self.budget_criteria = budget_criteria
        self.armed = armed
        self.w = writer
        self.run_id = run_id
        self.trajectory = Trajectory(task=task)
        self.watcher = LiveWatcher(armed=list(armed))
        self.errors: list[dict[str, Any]] = []
        self.critic_errors: list[dict[str, Any]] = []
        self.tool_errors = 0
        self.steps_done = 0
        self.tokens = {"input": 0, "output": 0, "total": 0}
        self.cost = 0.0
        self.crash_detail: Optional[str] = None
        self.clock = engine.clock
        self.t0 = self.clock()
        self.wall0 = datetime.now(timezone.utc)

    # -- trace helpers --------------------------------------------------------------------
    def event(self, phase: str, step: Optional[int], ok: bool = True, payload: Any = None, error: Any = None) -> None:
        if self.w is not None:
            self.w.event(phase, step=step, ok=ok, payload=payload, error=error, ts=self.now())

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def now(self) -> str:
        """The trace timestamp: the real start time plus the engine clock's elapsed time."""
        return (self.wall0 + timedelta(seconds=self.elapsed())).isoformat()

    def _error(self, phase: str, step: Optional[int], exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"
        self.errors.append({"phase": phase, "step": step, "error": text,
                            "traceback": traceback.format_exc(limit=8)})
        return text

    # -- pieces of a step -------------------------------------------------------------------
    def _act(self, decision: Decision[Any], step: int) -> tuple[list[Any], list[dict[str, Any]]]:
        tools = self.e._tools()
        results: list[Any] = []
        invocations: list[dict[str, Any]] = []
        for action in decision.actions:
            index = len(self.trajectory.tool_calls) + 1
            fn = tools.get(action.name)
            started = self.clock()
            status, error = "ok", None
            if fn is None:
                status, error = "error", f"unknown tool {action.name!r}"
                result: Any = {"status": "error", "error": error}
            else:
                try:
                    if isinstance(action.args, dict):
                        result = fn(**action.args)
                    elif action.args is None:
                        result = fn()
                    else:
                        result = fn(action.args)
                except Exception as exc:
                    # A failing tool is something the agent should see and react to, not a crash.
                    status, error = "error", f"{type(exc).__name__}: {exc}"
                    result = {"status": "error", "error": error}
            if status != "ok":
                self.tool_errors += 1
            latency_ms = round((self.clock() - started) * 1000.0, 3)
            results.append(result)
            invocations.append({"tool_name": action.name, "call_index": index, "latency_ms": latency_ms,
                                "status": status, "error": error})
            self.trajectory.tool_calls.append(ToolCall(index=index, step=step, name=action.name, args=action.args,
                                                       result=result, status=status, error=error))
            # Live verdicts are evaluated at tool-call granularity, as each call completes.
            self.watcher.observe(self.trajectory, step, index)
        return results, invocations

    def _critics(self, state: Any, decision: Decision[Any], results: list[Any], step: int
                 ) -> tuple[str, list[dict[str, Any]], Optional[dict[str, Any]]]:
        outputs: list[dict[str, Any]] = []
        decisive: dict[str, dict[str, Any]] = {}
        for critic in self.e.critics:
            name = critic_name(critic)
            try:
                raw = critic.evaluate(state, decision, results)
                if not isinstance(raw, dict):
                    raise TypeError(f"critic returned {type(raw).__name__}, expected dict")
            except Exception as exc:
                # A broken critic must not end the run: it is recorded and counts as continue.
                text = f"{type(exc).__name__}: {exc}"
                self.critic_errors.append({"critic": name, "step": step, "error": text})
                outputs.append({"critic": name, "action": CONTINUE, "reason": f"critic raised {text}",
                                "score": None, "details": {"error": text, "raised": True}})
                continue
            out = {"critic": name, "action": raw.get("action", CONTINUE), "reason": raw.get("reason"),
                   "score": raw.get("score"), "details": raw.get("details")}
            extra = {k: v for k, v in raw.items() if k not in ("action", "reason", "score", "details", "critic")}
            if extra:
                out["extra"] = _jsonable(extra)
            try:
                out["score"] = None if out["score"] is None else float(out["score"])
            except (TypeError, ValueError):
                out["details"] = {"details": out["details"], "unparsed_score": repr(out["score"])}
                out["score"] = None
            outputs.append(out)
            decisive.setdefault(effective_action(raw), out)
        # Every critic runs so every opinion is recorded; a stop outranks a retry.
        if STOP in decisive:
            return STOP, outputs, decisive[STOP]
        if RETRY in decisive:
            return RETRY, outputs, decisive[RETRY]
        return CONTINUE, outputs, None

    def _runtime_info(self) -> dict[str, Any]:
        return {"elapsed_seconds": self.elapsed(), "total_tokens": self.tokens["total"],
                "input_tokens": self.tokens["input"], "output_tokens": self.tokens["output"],
                "cost_usd": self.cost, "step_count": self.steps_done, "max_steps": self.budget.max_steps}

    def _check(self, criteria: list[StopCriteria], state: Any) -> tuple[Optional[StopReason], Optional[str]]:
        info = self._runtime_info()
        for criterion in criteria:
            stop, reason, detail = criterion.should_stop(state, self.steps_done, info)
            if stop:
                return _as_reason(reason, StopReason.SUCCESS), detail
        return None, None

    # -- the loop -----------------------------------------------------------------------------
    def execute(self, init_kwargs: dict[str, Any]) -> RunResult:
        e, task = self.e, self.task
        if self.w is not None:
            self.w.run_start(
                ts=self.now(), task_id=task.id, experiment=e.experiment, variant=e.variant, replicate=e.replicate,
                objective=task.objective, agent=getattr(self.agent, "name", None) or type(self.agent).__name__,
                model=e.model, budget=self.budget.to_record(), critics=[critic_name(c) for c in e.critics],
                stop_criteria=[{"name": c.name, "params": c.params()} for c in self.stop_criteria],
                criteria=[c.spec() for c in e.criteria], early_stop={"enabled": e.stop_early},
                tags=e.tags, metadata={**e.metadata, **({"task": task.metadata} if task.metadata else {})},
            )
        state: Any = None
        reason: Optional[StopReason] = None
        detail: Optional[str] = None

        # -- INIT and preflight
        try:
            validate = getattr(self.agent, "validate_task", None)
            problem = validate(task) if callable(validate) else None
            if not task.objective or not str(task.objective).strip():
                problem = problem or "task objective is empty"
            if problem:
                reason, detail = StopReason.TASK_VALIDATION_FAILED, str(problem if problem is not True else "invalid")
        except Exception as exc:
            reason, detail = StopReason.TASK_VALIDATION_FAILED, f"{type(exc).__name__}: {exc}"
        if reason is None and task.required_tools:
            missing = [t for t in task.required_tools if t not in e._tools()]
            if missing:
                reason, detail = StopReason.ENV_CAPABILITY_MISMATCH, f"missing tools: {missing}"
        if reason is None:
            try:
                state = self.agent.init_state(task, **init_kwargs)
                _set(state, "stop_reason", None)
            except Exception as exc:
                reason, detail = StopReason.UNRECOVERABLE_ERROR, self._error("INIT", None, exc)
        self.event("INIT", None, ok=reason is None, payload={"task_id": task.id, "budget": self.budget.to_record(),
                                                              "armed": [c.id for c in self.armed]},
                   error=detail if reason is not None else None)
        if state is None and reason is not None:
            # state.stop_reason is promised after every run: a run refused or broken before
            # the agent built its state gets a bare AgentState to carry it (init_state is
            # never called on a task the preflight refused).
            state = AgentState(task=task)
        if reason is None and self.budget.max_steps is not None and self.budget.max_steps <= 0:
            reason, detail = StopReason.BUDGET_STEPS, f"max_steps={self.budget.max_steps} allows no step"

        step = 0
        last_results: Optional[list[Any]] = None
        carried: Any = None
        retrying = False
        while reason is None:
            reason, detail, last_results, carried, retrying, state = self._step(
                step, state, last_results, carried, retrying)
            step += 1
        return self._finish(state, reason, detail)

    def _step(self, step: int, state: Any, last_results: Optional[list[Any]], carried: Any, retrying: bool):
        task = self.task
        ts = self.now()
        started = self.clock()
        _set(state, "step", step)
        before = _snapshot(state)
        prior_final = getattr(state, "final_result", None)
        record: dict[str, Any] = {"observation": None, "decision": None, "actions": [], "action_results": [],
                                  "tool_invocations": [], "critic_outputs": [], "state_diff": {},
                                  "tokens": {"input": 0, "output": 0, "total": 0}, "cost_usd": 0.0,
                                  "retry": retrying}
        reason: Optional[StopReason] = None
        detail: Optional[str] = None
        phase = "OBSERVE"
        drain = getattr(self.agent, "drain_usage", None)
        if callable(drain):
            drain()  # usage reported outside a step (e.g. in init_state) is not this step's
        results: list[Any] = []
        observation: Any = None
        decision: Optional[Decision[Any]] = None
        deciding: Optional[dict[str, Any]] = None
        try:
            # OBSERVE: a retried step sees the same observation again.
            observation = carried if retrying else self._observe_safe(state, step, last_results)
            record["observation"] = _jsonable(observation)
            self.event("OBSERVE", step, payload={"retry": retrying})

            phase = "DECIDE"
            decision = self.agent.decide(state, observation)
            if not isinstance(decision, Decision):
                raise TypeError(f"decide() returned {type(decision).__name__}, expected Decision")
            record["decision"] = decision.to_record()
            record["actions"] = [a.to_record() for a in decision.actions]
            self.event("DECIDE", step, payload={"mode": decision.mode, "actions": len(decision.actions)})

            phase = "ACT"
            results, invocations = self._act(decision, step)
            record["action_results"] = _jsonable(results)
            record["tool_invocations"] = invocations
            self.event("ACT", step, ok=all(i["status"] == "ok" for i in invocations),
                       payload={"tools": [i["tool_name"] for i in invocations]})

            phase = "REDUCE"
            post = dict(observation, action_results=results) if isinstance(observation, dict) else \
                {"observation": observation, "action_results": results}
            before_reduce = getattr(state, "final_result", None)
            new_state = self.agent.reduce(state, post, decision)
            if new_state is not None:
                state = new_state
            # A final decision is the step's answer unless reduce() chose to write one itself.
            if decision.is_final and getattr(state, "final_result", None) == before_reduce:
                _set(state, "final_result", decision.final_answer)
            self.event("REDUCE", step)
        except Exception as exc:
            reason, detail = StopReason.UNRECOVERABLE_ERROR, self._error(phase, step, exc)
            self.event(phase, step, ok=False, error=detail)
            decision = None

        # Token usage: whatever the decision carried plus anything reported during the step.
        usages: list[Usage] = []
        if decision is not None and decision.usage is not None:
            usages.append(decision.usage)
        if callable(drain):
            usages.extend(drain())
        step_in = sum(int(u.input) for u in usages)
        step_out = sum(int(u.output) for u in usages)
        step_cost = round(sum(float(u.cost_usd) for u in usages), 8)
        record["tokens"] = {"input": step_in, "output": step_out, "total": step_in + step_out}
        record["cost_usd"] = step_cost
        self.tokens["input"] += step_in
        self.tokens["output"] += step_out
        self.tokens["total"] += step_in + step_out
        self.cost = round(self.cost + step_cost, 8)
        self.steps_done = step + 1
        self.trajectory.steps = self.steps_done
        self.trajectory.final_result = getattr(state, "final_result", None)
        self.trajectory.state = state

        action = CONTINUE
        if reason is None:
            # Criteria may also look at the answer, not only at tool calls.
            self.watcher.observe(self.trajectory, step, None)
            if self.watcher.failed_open is not None and not getattr(self, "_fail_open_logged", False):
                self._fail_open_logged = True
                self.event("EARLY_STOP", step, ok=False, payload={"fail_open": True},
                           error=self.watcher.failed_open["error"])

            action, outputs, deciding = self._critics(state, decision, results, step)
            record["critic_outputs"] = outputs
            self.event("CRITIC", step, ok=not any(o["details"] and isinstance(o["details"], dict)
                                                  and o["details"].get("raised") for o in outputs),
                       payload={"action": action, "critics": len(outputs)})

            if action == STOP:
                reason, detail = StopReason.CRITIC_STOP, (deciding or {}).get("reason") or \
                    f"critic {(deciding or {}).get('critic')} returned stop"
            elif action == CONTINUE:
                # Critics passed: the agent's own word, then the stop criteria, then should_stop.
                _set(state, "retry_feedback", None)
                preset = getattr(state, "stop_reason", None)
                if preset:
                    reason, detail = _as_reason(preset, StopReason.SUCCESS), "stop_reason set by the agent"
                if reason is None:
                    reason, detail = self._check(self.stop_criteria, state)
                if reason is None:
                    should = getattr(self.agent, "should_stop", None)
                    if callable(should) and should(state):
                        reason, detail = StopReason.AGENT_CONDITION, "agent.should_stop() returned True"
                if reason is None and self.e.env is not None:
                    terminal = getattr(self.e.env, "is_terminal", None)
                    if callable(terminal) and terminal(state, results):
                        reason, detail = StopReason.ENV_TERMINAL, "environment reported a terminal state"
            # Budgets are hard limits: they apply even on a step the critics sent back for retry.
            if reason is None:
                reason, detail = self._check(self.budget_criteria, state)
            # Early stop fires only when nothing else would have ended the run here, so an
            # early_stop record always means steps were actually avoided.
            if reason is None and self.watcher.decision is not None:
                reason = StopReason.EARLY_STOP
                detail = (f"armed criteria decided; {self.watcher.decision.deciding_criterion} "
                          f"{'passed' if self.watcher.decision.reason == 'criterion_passed' else 'failed'}")
            self.event("CHECK_STOP", step, payload={"stop": reason is not None,
                                                   "stop_reason": reason.value if reason else None,
                                                   "detail": detail, "retry_next": reason is None
                                                   and action == RETRY})

        after = _snapshot(state)
        record["state_diff"] = _diff(before, after)
        record["duration_s"] = round(self.clock() - started, 6)
        if self.w is not None:
            self.w.step(step, ts=ts, **record)

        retry_next = reason is None and action == RETRY
        if retry_next:
            # An answer the critics rejected must not end the run on the next check.
            if getattr(state, "final_result", None) != prior_final:
                _set(state, "final_result", prior_final)
            _set(state, "retry_feedback", {"critic": deciding.get("critic") if deciding else None,
                                           "reason": deciding.get("reason") if deciding else None,
                                           "step": step})
        return reason, detail, results, (observation if retry_next else None), retry_next, state

    def _observe_safe(self, state: Any, step: int, last_results: Optional[list[Any]]) -> Any:
        return self.e._observe(state, self.task, step, last_results)

    def _finish(self, state: Any, reason: StopReason, detail: Optional[str]) -> RunResult:
        e = self.e
        if state is not None:
            _set(state, "stop_reason", reason)
        final = getattr(state, "final_result", None) if state is not None else None
        self.trajectory.final_result = final
        self.trajectory.state = state
        elapsed = self.elapsed()
        self.event("END", self.steps_done - 1 if self.steps_done else None,
                   ok=reason != StopReason.UNRECOVERABLE_ERROR,
                   payload={"stop_reason": reason.value, "steps": self.steps_done})

        stopped_early = reason == StopReason.EARLY_STOP
        decision = self.watcher.decision if stopped_early else None
        armed_ids = [c.id for c in self.armed]
        results: dict[str, CriterionResult] = {}
        for c in e.criteria:
            try:
                results[c.id] = c.check(self.trajectory)
            except Exception as exc:
                text = f"{type(exc).__name__}: {exc}"
                self.errors.append({"phase": "GRADE", "criterion": c.id, "error": text})
                results[c.id] = CriterionResult(score=0.0, passed=False, details={"error": text})
            if self.w is not None:
                r = results[c.id]
                self.w.criterion(c.id, score=r.score, passed=r.passed, details=_jsonable(r.details),
                                 live_verdict=(self.watcher.verdicts.get(c.id, "undecided")
                                               if c.id in armed_ids else None),
                                 decided_at_step=self.watcher.decided_at.get(c.id),
                                 armed=c.id in armed_ids, gating=c.gating,
                                 advisory=stopped_early and c.id not in armed_ids)
        verdict = compute_verdict(e.criteria, results, stopped_early, armed_ids)

        early_record = None
        if decision is not None:
            turns_remaining = (max(0, self.budget.max_steps - self.steps_done)
                               if self.budget.max_steps is not None else None)
            early_record = {"reason": decision.reason, "deciding_criterion": decision.deciding_criterion,
                            "armed_criteria": decision.armed_criteria, "step": self.steps_done - 1,
                            "decided_at_step": decision.step, "tool_call_index": decision.tool_call_index,
                            "elapsed_s": round(elapsed, 6), "turns_remaining": turns_remaining}
            if self.w is not None:
                self.w.early_stop(**early_record)

        failure_report: dict[str, Any] = {}
        if self.errors:
            failure_report["errors"] = self.errors
        if self.critic_errors:
            failure_report["critic_errors"] = self.critic_errors
        if self.tool_errors:
            failure_report["tool_errors"] = self.tool_errors
        if self.watcher.failed_open is not None:
            failure_report["early_stop_fail_open"] = self.watcher.failed_open

        if reason == StopReason.UNRECOVERABLE_ERROR:
            status = "error"
        elif reason in _FAILED_REASONS:
            status = "failed"
        else:
            status = "completed"
        final_text = None if final is None else (final if isinstance(final, str) else str(final))
        if self.w is not None:
            self.w.run_end(ts=self.now(), status=status, stop_reason=reason.value, stop_detail=detail, final_result=final_text,
                           verdict=verdict, steps=self.steps_done, tokens=dict(self.tokens),
                           cost_usd=self.cost, elapsed_s=round(elapsed, 6), failure_report=failure_report,
                           stopped_early=stopped_early)
        return RunResult(state=state, run_id=self.run_id, task=self.task, stop_reason=reason, stop_detail=detail,
                         status=status, final_result=final, verdict=verdict, steps=self.steps_done,
                         tokens=dict(self.tokens), cost_usd=self.cost, elapsed_s=elapsed, criteria=results,
                         early_stop=early_record, failure_report=failure_report,
                         trace_path=self.w.path if self.w is not None else None)


def _set(obj: Any, name: str, value: Any) -> None:
    if obj is None:
        return
    try:
        if isinstance(obj, dict):
            obj[name] = value
        else:
            setattr(obj, name, value)
    except Exception:
        pass  # frozen or slotted states simply do not get the engine's bookkeeping fields


def _as_reason(value: Any, fallback: StopReason) -> StopReason:
    if isinstance(value, StopReason):
        return value
    try:
        return StopReason(str(value))
    except ValueError:
        return fallback

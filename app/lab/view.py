"""What the lab page, its JSON twin and `qita whatif` show: one function builds it all.

The set of runs is a runs-list filter (an experiment's variant, a tag, a search...);
without one, the full variant (e2e) of the experiment compare would show first. The
policy comes from the request: `arm` (repeated `ID:pass|fail|decided`), `declared`
(each run's own arming), `rule`, `min_steps` and the caps; without any of them, the
arming the runs declare. An arming that cannot fire is refused with
`qita.live.LiveCapability.arming_refusal`'s text (a 400; exit 2 on the command line).

Every figure is cached until a run changes or the lab's state does (its version is
part of the key), as compare's are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from sqlalchemy import and_, or_, true
from sqlmodel import Session

from qita.live import LiveCapability

from .. import compare, notfound
from ..errors import BoardError
from ..models import RUNS
from ..queries import comparison as compare_queries
from ..queries.cache import data_cached, data_version
from ..queries.run_list import NONE_VALUE, RunFilters, run_conditions
from . import calibration, frontier, validate
from . import queries as lq
from .index import lab_version, pending_count
from .sim import RULES, STOP_WHEN, Policy, simulate

PAGE_PAIRS = 200


@dataclass
class PolicyArgs:
    """The policy as a request gives it (before it is checked against the runs)."""

    arm: Sequence[str] = ()
    declared: bool = False
    without: Sequence[str] = ()
    rule: str = "auto"
    min_steps: Optional[int] = None
    max_steps: Optional[int] = None
    max_tokens: Optional[float] = None
    max_seconds: Optional[float] = None
    #: the form was sent: an empty arming means "nothing armed", not "the declared one"
    chosen: bool = False

    @property
    def given(self) -> bool:
        return self.chosen or bool(self.arm) or self.declared or any(
            v is not None for v in (self.min_steps, self.max_steps, self.max_tokens, self.max_seconds))


def default_filters(session: Session, filters: RunFilters) -> tuple[RunFilters, bool]:
    """The set to show: the one asked for, else the full variant of compare's default experiment.

    An experiment, variant or tag that no run has is a 404 naming the valid ones, as compare
    answers it (a set that is empty only because of its other filters is just empty)."""
    asked = filters.as_params()
    for key in ("sort", "order", "offset", "limit"):
        asked.pop(key, None)
    if asked:
        _check_names(session, filters)
        if filters.experiment and filters.experiment != NONE_VALUE and not filters.variant:
            # An experiment's variants are one task list run several ways: together, each
            # task's runs of every variant but one were set aside as "duplicates", and the
            # verdicts mixed variants. One variant at a time, its full one by default.
            variants = lq.experiments_with_variants(session).get(filters.experiment) or []
            if len(variants) >= 2:
                return replace(filters, variant=full_variant(session, filters.experiment, variants)), True
        return filters, False
    pick = compare.choose_default(lq.experiments_with_variants(session))
    if pick is None:
        return filters, True
    experiment, _a, b = pick
    return RunFilters(experiment=experiment, variant=b), True


def full_variant(session: Session, experiment: str, variants: list[str]) -> str:
    """The variant of an experiment the lab simulates when none is named: one that ran with
    early stop off (the lab simulates full runs), `e2e` where it is one of them, as compare
    pairs smoke with e2e, else the first by name."""
    early = set(lq.early_stop_variants(session, experiment=experiment))
    full = [v for v in variants if v not in early] or list(variants)
    return "e2e" if "e2e" in full else full[0]


def _check_names(session: Session, filters: RunFilters) -> None:
    # "(none)" picks the runs without an experiment or variant, as on the runs list (whose
    # lab link carries it): it names no group to look for
    experiment = None if filters.experiment == NONE_VALUE else filters.experiment
    variant = None if filters.variant == NONE_VALUE else filters.variant
    if experiment and not compare_queries.group_exists(session, group=compare.Group("experiment", experiment)):
        raise notfound.missing_groups(session, kind="experiment", asked={"experiment": experiment},
                                      missing=[experiment])
    if experiment and variant and not compare_queries.group_exists(
            session, group=compare.Group("variant", variant, experiment)):
        raise notfound.missing_groups(session, kind="variant", asked={"variant": variant},
                                      missing=[variant], experiment=experiment)
    if filters.tag and not compare_queries.group_exists(session, group=compare.Group("tag", filters.tag)):
        raise notfound.missing_groups(session, kind="tag", asked={"tag": filters.tag}, missing=[filters.tag])


def set_key(filters: RunFilters) -> tuple:
    params = filters.as_params()
    for key in ("sort", "order", "offset", "limit"):
        params.pop(key, None)
    return tuple(sorted((k, str(v)) for k, v in params.items()))


def describe(filters: RunFilters) -> str:
    """The set in words: "variant e2e of experiment demo", "tag nightly", "runs matching ..."."""
    parts = []
    if filters.variant and filters.experiment:
        parts.append(f"variant {filters.variant} of experiment {filters.experiment}")
    elif filters.experiment:
        parts.append(f"experiment {filters.experiment}")
    elif filters.variant:
        parts.append(f"variant {filters.variant}")
    for name in ("tag", "model", "task_id", "stop_reason", "verdict", "state"):
        value = getattr(filters, name)
        if value:
            parts.append(f"{name.replace('_', ' ')} {value}")
    if filters.q:
        parts.append(f"matching {filters.q!r}")
    return ", ".join(parts) or "every run"


def parse_arm(item: str) -> tuple[str, str]:
    """`ID:when` (an id may itself hold colons: the last one separates)."""
    cid, sep, when = item.rpartition(":")
    if not sep or not cid:
        raise BoardError(f"arm must be CRITERION_ID:pass|fail|decided, not {item[:120]!r}")
    if when not in STOP_WHEN:
        raise BoardError(f"criterion {cid[:200]!r}: stop_when must be one of {', '.join(STOP_WHEN)}, not {when[:40]!r}")
    return cid, when


def capability(entry: dict[str, Any]) -> LiveCapability:
    """A catalogue entry's capability over the whole set (the union of what its runs can decide)."""
    return LiveCapability(entry["id"], entry.get("type"), tuple(entry["polarities"]), entry.get("reason"))


def informational_refusal(entry: dict[str, Any]) -> Optional[str]:
    """Why an informational criterion is never armed in the lab: the trace format says a
    criterion with `gating: false` never gates, and an early-stopped run is gated on its
    armed criteria, so arming it would let a check its task does not count decide the
    verdict (the frontier would even recommend it where it saves most)."""
    if entry.get("gating", True):
        return None
    return (f"criterion {entry['id']!r} is informational (gating: false): it never gates a verdict, so it "
            f"cannot be armed (an early-stopped run is gated on its armed criteria)")


def arming_refusal(entry: dict[str, Any], stop_when: str) -> Optional[str]:
    """Why arming a catalogue entry with `stop_when` is refused (None when it can fire)."""
    return capability(entry).arming_refusal(stop_when) or informational_refusal(entry)


def arming_options(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Each stop_when with whether it can be armed, and if not, why (`arming_refusal`)."""
    return [{"stop_when": w, "refusal": arming_refusal(entry, w)} for w in STOP_WHEN]


def make_policy(args: PolicyArgs, catalogue: list[dict[str, Any]]) -> Policy:
    """The policy asked for, checked against the set's criteria: an unknown criterion or an
    arming that could never fire is a BoardError (400) with the reason."""
    if args.rule not in RULES:
        raise BoardError(f"rule must be one of {', '.join(RULES)}, not {args.rule[:40]!r}")
    for name, least in (("min_steps", 0), ("max_steps", 1), ("max_tokens", 1), ("max_seconds", 0)):
        value = getattr(args, name)
        if value is not None and (value < least or (name == "max_seconds" and value == 0)):
            raise BoardError(f"{name} must be {'at least ' + str(least) if least else 'more than 0'}, not {value:g}")
    if not args.given:
        declared = any(c["declared"] for c in catalogue)
        return Policy(declared=declared)
    by_id = {c["id"]: c for c in catalogue}
    arm: dict[str, str] = {}
    for item in args.arm:
        if not item:
            continue
        cid, when = parse_arm(item)
        entry = by_id.get(cid)
        if entry is None:
            raise BoardError(f"no criterion {cid[:200]!r} in these runs: arm one of the criteria the lab lists")
        refusal = arming_refusal(entry, when)
        if refusal:
            raise BoardError(refusal)
        arm[cid] = when
    declared = args.declared and not arm
    without = tuple(dict.fromkeys(w for w in args.without if w)) if declared else ()
    unknown = [w for w in without if w not in by_id]
    if unknown:
        raise BoardError(f"no criterion {unknown[0][:200]!r} in these runs to leave out")
    return Policy(arm=tuple(arm.items()), declared=declared, without=without, rule=args.rule,
                  min_steps=args.min_steps or None, max_steps=args.max_steps, max_tokens=args.max_tokens,
                  max_seconds=args.max_seconds)


def index_scope(filters: RunFilters, where: list[Any]) -> list[Any]:
    """The runs a set needs indexed: its own, and for a variant of an experiment the whole
    experiment (its recorded early-stop runs are what the simulation is checked against)."""
    if filters.experiment:
        return [or_(RUNS.c.experiment == filters.experiment, and_(*where) if where else true())]
    return where


def _cached(session: Session, key: tuple, compute: Any) -> Any:
    return data_cached(session, key=("lab", *key, lab_version(session)), compute=compute)


def set_runs(session: Session, key: tuple, where: list[Any]) -> dict[str, Any]:
    """The set's runs to simulate, one per (task, replicate) by compare's rule (the latest;
    app.compare.index_runs), and the duplicates set aside as compare sets them aside."""
    def compute() -> dict[str, Any]:
        runs = lq.load_runs(session, where=where)
        kept, duplicates = compare.index_runs([r.row for r in runs])
        keep = {id(row) for row in kept.values()}
        return {"runs": [r for r in runs if id(r.row) in keep], "duplicates": duplicates}
    return _cached(session, ("runs", key), compute)


def lab(session: Session, *, filters: RunFilters, args: PolicyArgs, sort: str = "task", only: str = "",
        offset: int = 0, limit: Optional[int] = None, with_frontier: bool = True, measure: str = "tokens",
        with_calibration: bool = True, indexer: Any = None) -> dict[str, Any]:
    """Everything the lab shows for one set and one policy (docs/lab.md)."""
    data_version(session), lab_version(session)  # before any of the data they key (see lab_version)
    asked_variant = filters.variant
    filters, defaulted = default_filters(session, filters)
    key = set_key(filters)
    # the experiment was named without a variant: the one chosen, and the others to choose from
    variants = (lq.experiments_with_variants(session).get(filters.experiment or "") or []
                if defaulted and not asked_variant and filters.variant else [])
    where = run_conditions(session, filters=filters)
    scope = index_scope(filters, where)
    pending = pending_count(session, where=scope)
    if pending and indexer is not None:
        indexer.ask(key, scope)
    counts = _cached(session, ("counts", key), lambda: lq.set_counts(session, where=where))
    catalogue = _cached(session, ("catalogue", key), lambda: lq.criteria_catalogue(session, where=where))
    chosen = set_runs(session, key, where)
    runs = chosen["runs"]
    policy = make_policy(args, catalogue)
    result = _cached(session, ("sim", key, policy), lambda: simulate(policy, runs))
    rows = compare.sort_pairs(result["pairs"], sort=sort, disagreements_only=only == "disagree")
    start = max(0, offset)
    shown = rows[start:start + limit] if limit is not None else rows[start:]
    data: dict[str, Any] = {
        "set": {"filters": {k: v for k, v in key}, "description": describe(filters), "defaulted": defaulted,
                "variants": variants,
                **counts, "simulated": len(runs), "duplicates": chosen["duplicates"]},
        "indexing": {"pending": pending, "ready": pending == 0},
        "criteria": [{**c, "arming": arming_options(c)} for c in catalogue],
        "policy": result["policy"],
        "policy_params": {**policy.params(), "policy": "1"},
        "headline": result["headline"],
        "summary": result["summary"],
        "pairs": shown,
        "pairs_total": len(rows),
        "pairs_offset": start,
        "validation": _validation(session, filters, runs, key),
        "frontier": frontier_of(session, filters=filters, measure=measure, runs=runs, catalogue=catalogue)
        if with_frontier else None,
        "calibration": calibration_of(session) if with_calibration else None,
    }
    return data


def frontier_of(session: Session, *, filters: RunFilters, measure: str = "tokens",
                runs: Optional[list] = None, catalogue: Optional[list] = None) -> dict[str, Any]:
    """The policy frontier of a set (cached)."""
    if measure not in frontier.MEASURES:
        raise BoardError(f"measure must be one of {', '.join(frontier.MEASURES)}, not {measure[:40]!r}")
    data_version(session), lab_version(session)
    filters, _ = default_filters(session, filters)
    key = set_key(filters)
    if runs is None or catalogue is None:
        where = run_conditions(session, filters=filters)
        catalogue = _cached(session, ("catalogue", key), lambda: lq.criteria_catalogue(session, where=where))
        runs = set_runs(session, key, where)["runs"]
    return _cached(session, ("frontier", key, measure), lambda: frontier.frontier(runs, catalogue, measure=measure))


def calibration_of(session: Session) -> dict[str, Any]:
    """Every criterion of the store, calibrated (cached)."""
    def compute() -> dict[str, Any]:
        rows, experiments = lq.calibration_rows(session)
        return calibration.calibrate(rows, experiments)
    return _cached(session, ("calibration",), compute)


def _validation(session: Session, filters: RunFilters, runs: list, key: tuple) -> Optional[dict[str, Any]]:
    """Smoke's own policy over this set, against the recorded smoke runs: only for a variant
    of an experiment that also has a variant run with early stop on."""
    if not (filters.experiment and filters.variant) or NONE_VALUE in (filters.experiment, filters.variant):
        return None  # "(none)" names no variant that smoke could have run beside
    smoke_variants = [v for v in lq.early_stop_variants(session, experiment=filters.experiment) if v != filters.variant]
    if not smoke_variants:
        return None
    variant = "smoke" if "smoke" in smoke_variants else smoke_variants[0]

    def compute() -> dict[str, Any]:
        smoke = [r for r in lq.partners(session, experiment=filters.experiment, variant=filters.variant)
                 if r["variant"] == variant]
        pks = [r["id"] for r in smoke]
        digests = lq.signatures(session, run_pks=pks + [r.row["id"] for r in runs])
        out = validate.validate(runs, smoke, lq.declared_armings(session, run_pks=pks), digests,
                                lambda wanted: lq.step_calls_at(session, pairs=wanted),
                                label_a=variant, label_b=filters.variant)
        out["variant"] = variant
        return out
    return _cached(session, ("validation", key, variant), compute)

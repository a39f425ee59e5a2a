"""The thesis' metrics of one method at n samples (Table 6.1): pure functions of compiled costs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MethodResult:
    """One method on one function: its candidates in order (cost None = did not compile)."""

    costs: tuple[int | None, ...]
    predicted_before: tuple[int | None, ...] = ()
    predicted_after: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class FunctionCosts:
    unoptimized: int
    oz: int


@dataclass(frozen=True)
class Row:
    method: str
    samples: int
    functions: int
    improvement: float  # % of the -Oz total saved, without -Oz backup
    improvement_with_oz: float  # ... with the -Oz candidate included
    improved: int
    regressed: int
    validity: float | None  # % of candidates that compile (None: no candidates)
    mape_before: float | None  # % error of the predicted unoptimized count
    mape_after: float | None  # % error of the predicted optimized count
    candidates: float  # mean candidates per function among the first n


def best_cost(function: FunctionCosts, result: MethodResult, n: int, with_oz: bool) -> int:
    """The best cost among the first n candidates; no compiling candidate leaves the IR unoptimized."""
    compiled = [c for c in result.costs[:n] if c is not None]
    best = min(compiled) if compiled else function.unoptimized
    return min(best, function.oz) if with_oz else best


def _mape(pairs: Iterable[tuple[int, int]]) -> float | None:
    errors = [abs(predicted - actual) / max(actual, 1) for predicted, actual in pairs]
    return 100 * sum(errors) / len(errors) if errors else None


def summarize(
    method: str,
    n: int,
    functions: Sequence[FunctionCosts],
    results: Sequence[MethodResult],
) -> Row:
    """The thesis' metrics of one method at n samples over functions (results[i] belongs to functions[i])."""
    oz_total = sum(f.oz for f in functions)
    without = [best_cost(f, r, n, with_oz=False) for f, r in zip(functions, results, strict=True)]
    with_oz = [best_cost(f, r, n, with_oz=True) for f, r in zip(functions, results, strict=True)]
    candidates = [c for r in results for c in r.costs[:n]]
    before, after = [], []
    for function, result in zip(functions, results, strict=True):
        for i, cost in enumerate(result.costs[:n]):
            if i < len(result.predicted_before) and result.predicted_before[i] is not None:
                before.append((result.predicted_before[i], function.unoptimized))
            if cost is not None and i < len(result.predicted_after) and result.predicted_after[i] is not None:
                after.append((result.predicted_after[i], cost))
    percent = (lambda saved: 100 * saved / oz_total) if oz_total else (lambda saved: 0.0)
    return Row(
        method=method,
        samples=n,
        functions=len(functions),
        improvement=percent(sum(f.oz - b for f, b in zip(functions, without, strict=True))),
        improvement_with_oz=percent(sum(f.oz - b for f, b in zip(functions, with_oz, strict=True))),
        improved=sum(b < f.oz for f, b in zip(functions, without, strict=True)),
        regressed=sum(b > f.oz for f, b in zip(functions, without, strict=True)),
        validity=100 * sum(c is not None for c in candidates) / len(candidates) if candidates else None,
        mape_before=_mape(before),
        mape_after=_mape(after),
        candidates=len(candidates) / len(functions) if functions else 0.0,
    )

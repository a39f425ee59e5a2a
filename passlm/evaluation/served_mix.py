"""What the service would answer per function when a model's candidates are compiled beside the coreset's.

`optserve eval passes` measures each method alone. The service compiles the model's lists together with the
coreset's first `engine.coreset_lists_with_model` lists and -Oz, so the numbers a user sees are mixes. This
reads eval journals (`--journal`, or the `.journal.jsonl` beside `--json-out`) and reports, on the functions
every journal answered (prompt-too-long ones left out):

  greedy            the model's greedy list alone (a list that fails to compile counts as unoptimized)
  greedy + floor    the better of it and -Oz
  served greedy     greedy + the coreset's first list + -Oz: the default request (optcc's)
  PS@n + floor      priority sampling's first n lists and -Oz
  PS@n + coreset@n  both sets of n lists and -Oz

The coreset's costs come from the journal of a run with `--methods ...,coreset` (`--coreset-journal`), the
model's from each model's journal. Improvement: sum over functions of (-Oz - best) / sum of -Oz.

    python -m optserve.passlm.evaluation.served_mix --coreset-journal runs/eval14/v3_all.journal.jsonl \
        runs/eval14/v3_all.journal.jsonl runs/eval16/v9_run0.journal.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COLUMNS = (
    "greedy",
    "greedy + floor",
    "served greedy",
    "PS@10 + floor",
    "PS@5 + coreset@5",
    "PS@10 + coreset@10",
)


def read_journal(path: Path) -> dict[tuple[str, str], dict]:
    """(function, method) -> the journal's record (the last one wins, as in the eval's resume)."""
    records = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            records[(record["function"], record["method"])] = record
    return records


def _compiled(costs: list, n: int) -> list[int]:
    return [cost for cost in costs[:n] if cost is not None]


def function_costs(model: dict, coreset: dict) -> dict[str, int]:
    """One function's cost under each column, from its greedy and priority records and the coreset's."""
    greedy, priority = model["greedy"], model["priority"]
    oz = greedy["oz"]
    first = greedy["costs"][0] if greedy["costs"] and greedy["costs"][0] is not None else None
    return {
        "oz": oz,
        "greedy": first if first is not None else greedy["unoptimized"],
        "greedy + floor": min([oz, *_compiled(greedy["costs"], 1)]),
        "served greedy": min([oz, *_compiled(greedy["costs"], 1), *_compiled(coreset["costs"], 1)]),
        "PS@10 + floor": min([oz, *_compiled(priority["costs"], 10)]),
        "PS@5 + coreset@5": min([oz, *_compiled(priority["costs"], 5), *_compiled(coreset["costs"], 5)]),
        "PS@10 + coreset@10": min([oz, *_compiled(priority["costs"], 10), *_compiled(coreset["costs"], 10)]),
    }


def mixes(models: dict[str, dict], coreset: dict) -> tuple[int, dict[str, dict[str, float]]]:
    """(functions, model name -> column -> % saved vs -Oz) over the functions all journals answered."""

    def answered(journal: dict, function: str, methods: tuple[str, ...]) -> bool:
        return all((function, m) in journal and not journal[(function, m)].get("skipped") for m in methods)

    functions = sorted(
        f
        for f, method in coreset
        if method == "coreset"
        and answered(coreset, f, ("coreset",))
        and all(answered(j, f, ("greedy", "priority")) for j in models.values())
    )
    table = {}
    for name, journal in models.items():
        totals = dict.fromkeys(("oz", *COLUMNS), 0)
        for function in functions:
            by_method = {m: journal[(function, m)] for m in ("greedy", "priority")}
            for column, cost in function_costs(by_method, coreset[(function, "coreset")]).items():
                totals[column] += cost
        table[name] = {c: 100 * (totals["oz"] - totals[c]) / totals["oz"] for c in COLUMNS}
    return len(functions), table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("journals", type=Path, nargs="+", help="each model's eval journal (greedy, priority)")
    parser.add_argument("--coreset-journal", type=Path, required=True, help="a journal with coreset results")
    args = parser.parse_args(argv)
    coreset = read_journal(args.coreset_journal)
    count, table = mixes({str(p): read_journal(p) for p in args.journals}, coreset)
    print(f"{count} functions, `.text` (or the eval's objective) saved vs -Oz\n")
    print("| journal | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.2f}%" for c in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

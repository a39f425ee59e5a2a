"""`optserve eval passes`: the thesis' metrics, resumable runs, and the command end to end.

Real parts: a tiny random model (passlm.tiny_model) on the torch backend, the crash-isolated compiler pool,
and a small corpus labelled by the real autotuner, written in tmp in the corpus layout.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from optserve.compiler.autotune import autotune
from optserve.compiler.ir import normalize_ir
from optserve.compiler.workers import CompilerPool
from optserve.corpus.journal import read_jsonl, write_jsonl_atomic
from optserve.corpus.layout import CorpusLayout
from optserve.passlm.evaluation.candidates import random_lists
from optserve.passlm.evaluation.journal import result_at
from optserve.passlm.evaluation.methods import EvalConfig, Method, parse_methods, parse_samples
from optserve.passlm.evaluation.metrics import FunctionCosts, MethodResult, summarize
from optserve.passlm.evaluation.pipeline import run, select_functions
from optserve.passlm.evaluation.report import collect
from optserve.passlm.tiny_model import build_tiny_model, synthetic_function

FUNCTIONS = 3


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="module")
def labelled_corpus(tmp_path_factory) -> Path:
    """A test split of FUNCTIONS synthetic functions, labelled by the autotuner (budget 20)."""
    root = tmp_path_factory.mktemp("corpus")
    layout = CorpusLayout(root)
    rng = random.Random(3)
    examples, labels = [], []
    with CompilerPool(1, timeout_s=20) as pool:
        for index in range(FUNCTIONS):
            ir = normalize_ir(synthetic_function(rng, f"fn{index}"))
            example_id = hashlib.sha256(ir.encode()).hexdigest()
            examples.append({"id": example_id, "source": "synthetic", "split": "test", "ir": ir})
            tuned = autotune(ir, budget=20, seed=index, pool=pool)
            labels.append(
                {
                    "key": example_id,
                    "split": "test",
                    "source": "synthetic",
                    "instruction_count": {
                        "unoptimized": tuned.unoptimized_cost,
                        "oz": tuned.oz_cost,
                        "best": tuned.best_cost,
                        "pass_list": list(tuned.best_pass_list),
                        "compilations": tuned.compilations,
                    },
                }
            )
    shard = layout.shard_path("test", 0)
    write_jsonl_atomic(shard, examples)
    write_jsonl_atomic(layout.label_path("autotune", shard), labels)
    return root


def _config(model_dir: Path, corpus: Path, tmp_path: Path, **overrides) -> EvalConfig:
    settings = {
        "model_dir": model_dir,
        "corpus_dir": corpus,
        "journal_path": tmp_path / "eval.journal.jsonl",
        "samples": (1, 3),
        "methods": parse_methods("greedy,priority,random,autotuner"),
        "workers": 2,
    } | overrides
    return EvalConfig(**settings)


# --- metrics on a hand-made case -------------------------------------------------------------------------


def test_metrics_of_known_candidate_costs():
    functions = [FunctionCosts(unoptimized=20, oz=10), FunctionCosts(unoptimized=30, oz=20)]
    results = [
        MethodResult(costs=(12, None, 8), predicted_before=(22, 20, 18), predicted_after=(12, 5, 10)),
        MethodResult(costs=(None,)),  # nothing compiles: unoptimized without backup, -Oz with it
    ]
    first = summarize("m", 1, functions, results)
    assert first.improvement == pytest.approx(100 * ((10 - 12) + (20 - 30)) / 30)
    assert first.improvement_with_oz == 0.0
    assert (first.improved, first.regressed) == (0, 2)
    assert first.validity == 50.0
    assert first.mape_before == pytest.approx(10.0)
    assert first.mape_after == pytest.approx(0.0)

    third = summarize("m", 3, functions, results)
    assert third.improvement == pytest.approx(100 * ((10 - 8) + (20 - 30)) / 30)
    assert third.improvement_with_oz == pytest.approx(100 * 2 / 30)
    assert (third.improved, third.regressed) == (1, 1)
    assert third.validity == 50.0  # 2 of 4 candidates compile
    assert third.mape_before == pytest.approx(100 * (0.1 + 0 + 0.1) / 3)
    assert third.mape_after == pytest.approx(100 * (0 + 2 / 8) / 2)  # the failed candidate has no cost
    assert third.candidates == 2.0


def test_nucleus_rows_read_the_candidates_of_their_own_draw_count():
    record = {"costs": [9, 7, None], "predicted_before": [20, 21, 22], "predicted_after": [9, 8, 1],
              "by_draws": {"1": [0], "3": [1, 0, 2]}}  # fmt: skip
    assert result_at(record, 1) == MethodResult((9,), (20,), (9,))
    assert result_at(record, 3) == MethodResult((7, 9, None), (21, 20, 22), (8, 9, 1))
    plain = {"costs": [4, 3], "predicted_before": [], "predicted_after": [], "by_draws": None}
    assert result_at(plain, 1) == MethodResult((4, 3), (None, None), (None, None))  # summarize takes prefixes


def test_methods_and_samples_parse_or_say_why():
    assert [m.name for m in parse_methods("greedy, nucleus-1.2,random")] == [
        "greedy",
        "nucleus-1.2",
        "random",
    ]
    assert Method.parse("nucleus-0.8").temperature == 0.8
    assert Method.parse("greedy").sample_counts((1, 3, 10)) == (1,)
    assert parse_samples("10,1,3,3") == (1, 3, 10)
    for bad in ("beam", "nucleus", "nucleus-x", "greedy-2", "nucleus-0"):
        with pytest.raises(ValueError):
            Method.parse(bad)
    with pytest.raises(ValueError, match="twice"):
        parse_methods("greedy,greedy")
    with pytest.raises(ValueError):
        parse_samples("0,3")


def test_random_lists_are_unique_and_fixed_by_seed():
    lists = random_lists("abc", seed=0, count=30)
    assert len(set(lists)) == 30
    assert random_lists("abc", seed=0, count=10) == lists[:10]  # a smaller n is a prefix
    assert random_lists("abc", seed=1, count=30) != lists


# --- real runs -------------------------------------------------------------------------------------------


def test_run_measures_every_method_against_oz(tiny_model_dir, labelled_corpus, tmp_path):
    config = _config(tiny_model_dir, labelled_corpus, tmp_path)
    functions = select_functions(config)
    summary = run(config, functions, progress=False)
    assert (summary.computed, summary.done_before) == (FUNCTIONS * 4, 0)

    records = list(read_jsonl(config.journal_path))
    labels = {f["id"]: f["labels"]["instruction_count"] for f in functions}
    for record in records:  # -O0 and -Oz measured fresh agree with the labeller's
        assert (record["unoptimized"], record["oz"]) == (
            labels[record["function"]]["unoptimized"],
            labels[record["function"]]["oz"],
        )
        assert len(record["costs"]) <= (1 if record["method"] in ("greedy", "autotuner") else 3)

    results = collect(config, functions)
    assert results["functions"] == FUNCTIONS
    rows = {(r["method"], r["samples"]): r for r in results["rows"]}
    assert set(rows) == {("greedy", 1), ("priority", 1), ("priority", 3), ("random", 1), ("random", 3),
                         ("autotuner", 1)}  # fmt: skip
    oz_total = sum(label["oz"] for label in labels.values())
    autotuner_saved = sum(label["oz"] - label["best"] for label in labels.values())
    assert rows["autotuner", 1]["improvement"] == pytest.approx(100 * autotuner_saved / oz_total)
    for row in rows.values():
        assert row["improvement_with_oz"] >= max(row["improvement"], 0.0)
    for method in ("priority", "random"):  # more samples never hurt: n=1 is a prefix of n=3
        assert rows[method, 3]["improvement"] >= rows[method, 1]["improvement"]
        assert rows[method, 3]["improvement_with_oz"] >= rows[method, 1]["improvement_with_oz"]
    # The random row is recomputed from the journal's costs: the table reads what was measured.
    random_records = [r for r in records if r["method"] == "random"]
    best = sum(
        r["oz"] - min([c for c in r["costs"] if c is not None] or [r["unoptimized"]]) for r in random_records
    )
    assert rows["random", 3]["improvement"] == pytest.approx(100 * best / oz_total)
    assert results["timings"]["priority"]["generate_s"] > 0


def test_run_resumes_without_repeating_work(tiny_model_dir, labelled_corpus, tmp_path):
    config = _config(tiny_model_dir, labelled_corpus, tmp_path, methods=parse_methods("priority,random"))
    first = run(config, select_functions(_config(tiny_model_dir, labelled_corpus, tmp_path, limit=2)), False)
    assert first.computed == 2 * 2
    with open(config.journal_path, "a") as journal:  # a record torn by a kill
        journal.write('{"key": "torn')
    lines_before = config.journal_path.read_text().splitlines()[:-1]

    functions = select_functions(config)
    second = run(config, functions, progress=False)
    assert (second.done_before, second.computed) == (2 * 2, 1 * 2)  # only the third function
    assert config.journal_path.read_text().splitlines()[: len(lines_before)] == lines_before

    assert run(config, functions, progress=False).computed == 0
    fewer = _config(tiny_model_dir, labelled_corpus, tmp_path, methods=config.methods, samples=(1,))
    assert run(fewer, functions, progress=False).computed == 0  # n=1 is a prefix of what was drawn
    reseeded = _config(tiny_model_dir, labelled_corpus, tmp_path, methods=config.methods, seed=7)
    assert run(reseeded, functions, progress=False).computed == FUNCTIONS  # random lists only
    assert collect(reseeded, functions)["functions"] == FUNCTIONS


def test_command_end_to_end(tiny_model_dir, labelled_corpus, tmp_path, capsys):
    from optserve.cli import main

    report, plot, json_out = tmp_path / "eval.md", tmp_path / "eval.svg", tmp_path / "eval.json"
    argv = ["eval", "passes", "--model-dir", str(tiny_model_dir), "--corpus", str(labelled_corpus),
            "--limit", "3", "--samples", "1,3", "--methods", "greedy,priority,nucleus-1.2,random,autotuner",
            "--backend", "torch", "--workers", "2", "--json-out", str(json_out), "--report", str(report),
            "--plot", str(plot), "--json"]  # fmt: skip
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json_out.read_text())
    assert printed["results"]["functions"] == 3
    assert printed["meta"]["command"].startswith(f"optserve eval passes --model-dir {tiny_model_dir} ")
    assert (
        "--samples 1,3 --methods greedy,priority,nucleus-1.2,random,autotuner" in printed["meta"]["command"]
    )
    table = report.read_text()
    for row in ("greedy@1", "priority@1", "priority@3", "nucleus-1.2@3", "random@3", "autotuner ("):
        assert f"| {row}" in table
    assert "with -Oz backup" in table and "MAPE after" in table
    assert plot.read_text().lstrip().startswith("<?xml") and plot.stat().st_size < 100_000
    nucleus = [r for r in read_jsonl(json_out.with_suffix(".journal.jsonl")) if r["method"] == "nucleus-1.2"]
    for record in nucleus:  # n draws for each n: at most n unique candidates, all among those compiled
        assert set(record["by_draws"]) == {"1", "3"}
        assert all(len(record["by_draws"][n]) <= int(n) for n in ("1", "3"))
        assert len(record["costs"]) <= 1 + 3

    assert main([*argv[:-1], "--json"]) == 0  # rerun: everything comes from the journal
    assert json.loads(capsys.readouterr().out)["meta"]["run"]["computed"] == 0


def test_command_says_what_is_wrong(tiny_model_dir, labelled_corpus, tmp_path, capsys):
    from optserve.cli import main

    base = [
        "eval",
        "passes",
        "--corpus",
        str(labelled_corpus),
        "--json-out",
        str(tmp_path / "e.json"),
        "--json",
    ]
    assert main([*base, "--model-dir", str(tmp_path), "--methods", "greedy"]) == 2
    assert "not a model directory" in json.loads(capsys.readouterr().out)["error"]
    assert main([*base, "--model-dir", str(tiny_model_dir), "--methods", "beam"]) == 2
    assert "unknown method" in json.loads(capsys.readouterr().out)["error"]
    assert main([*base, "--model-dir", str(tiny_model_dir), "--split", "val"]) == 2
    assert "no val shards" in json.loads(capsys.readouterr().out)["error"]


def test_a_prompt_too_long_is_excluded_once_not_left_for_later(tiny_model_dir, tmp_path):
    # One function longer than the tiny model's 2,048 positions: every model method skips it, nucleus too
    # (whose results are kept per draw count), and a rerun neither computes it again nor calls it unfinished.
    body = [f"  %v{i} = add i32 %v{i - 1}, {i}" for i in range(1, 700)]
    ir = normalize_ir("\n".join(["define i32 @long(i32 %v0) {", "entry:", *body, "  ret i32 %v699", "}", ""]))
    root = tmp_path / "corpus"
    layout = CorpusLayout(root)
    example_id = hashlib.sha256(ir.encode()).hexdigest()
    shard = layout.shard_path("test", 0)
    write_jsonl_atomic(shard, [{"id": example_id, "source": "synthetic", "split": "test", "ir": ir}])
    with CompilerPool(1, timeout_s=20) as pool:
        tuned = autotune(ir, budget=3, seed=0, pool=pool)
    label = {"unoptimized": tuned.unoptimized_cost, "oz": tuned.oz_cost, "best": tuned.best_cost,
             "pass_list": list(tuned.best_pass_list), "compilations": tuned.compilations}  # fmt: skip
    record = {"key": example_id, "split": "test", "source": "synthetic", "instruction_count": label}
    write_jsonl_atomic(layout.label_path("autotune", shard), [record])
    config = _config(tiny_model_dir, root, tmp_path, methods=parse_methods("greedy,nucleus-1.0,random"))
    functions = select_functions(config)
    assert run(config, functions, progress=False).computed == 3
    results = collect(config, functions)
    assert (results["functions"], results["not_evaluated_yet"]) == (0, 0)
    assert results["excluded"] == {"prompt too long": 1}
    assert run(config, functions, progress=False).computed == 0

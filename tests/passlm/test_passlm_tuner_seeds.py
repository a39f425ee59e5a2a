"""Tuner seeds (issue 35): compiles to 95% of the search's saving, with and without the model's samples.

Real parts: the tiny random model on the torch backend, `optserve tune`'s search task in a process pool of
crash-isolated compiler processes, and the small autotuned corpus of the `eval passes` tests.
"""

from __future__ import annotations

import json

from optserve.passlm.evaluation.tuner_seeds import (
    best_so_far,
    compiles_to_reach,
    main,
    measure,
    summarize,
)
from tests.passlm.test_passlm_eval import labelled_corpus, tiny_model_dir  # noqa: F401 (fixtures)


def test_best_so_far_ignores_o0_and_failures():
    # -O0 100, -Oz 50, a failed list, 60, 40, 45
    assert best_so_far([100, 50, None, 60, 40, 45]) == [100, 50, 50, 50, 40, 40]


def test_compiles_to_reach_counts_from_one():
    trace = [100, 50, 48, 40, 41]  # best saving 10: 95% of it (9.5) first reached at compile 4
    assert compiles_to_reach(trace, 50, 9.5) == 4
    assert compiles_to_reach(trace, 50, 11) is None


def _record(coreset_trace, model_trace, model_lists=(("x",),)):
    searches = {
        variant: {"trace": trace, "best_cost": best_so_far(trace)[-1], "compilations": len(trace)}
        for variant, trace in (("coreset", coreset_trace), ("model", model_trace))
    }
    record = {"model_lists": list(model_lists), "searches": searches}
    measure(record)
    return record


def test_summary_of_known_traces():
    # coreset: saving 10 (target 9.5) at compile 6; model: 40 at compile 3, then 38 (saving 12) at compile 6
    found = _record([100, 50, 50, 49, 48, 40], [100, 50, 40, 45, 48, 38])
    flat = _record([10, 10, 12], [10, 10, 11], model_lists=())  # nothing to reach
    assert found["targets"] == {"coreset_search": 9.5, "best_search": 0.95 * 12}
    summary = summarize([found, flat])
    assert (summary["functions"], summary["with_model_seeds"], summary["oz_total"]) == (2, 1, 60)
    by_coreset, by_best = summary["targets"]["coreset_search"], summary["targets"]["best_search"]
    assert (by_coreset["with_target"], by_coreset["no_saving_to_reach"]) == (1, 1)
    assert (by_coreset["coreset"]["median"], by_coreset["model"]["median"]) == (6, 3)
    assert by_coreset["model"]["share_within_100"] == 1.0
    # 11.4 is out of the coreset search's reach: it counts at its 6 compiles in the mean, and is not reached
    assert (by_best["coreset"]["reached"], by_best["coreset"]["mean"]) == (0, 6)
    assert (by_best["model"]["reached"], by_best["model"]["median"]) == (1, 6)
    assert summary["variants"]["model"]["saved_at"]["2"] == 0.0  # -Oz alone
    assert summary["variants"]["model"]["final_saved"] == round(12 / 60, 5)
    assert summary["variants"]["coreset"]["final_saved"] == round(10 / 60, 5)


def test_command_end_to_end(tiny_model_dir, labelled_corpus, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "seeds.json"
    code = main(
        [
            "--model-dir", str(tiny_model_dir), "--corpus", str(labelled_corpus), "--objective",
            "instruction_count", "--budget", "30", "--samples", "3", "--workers", "2", "--json-out", str(out),
            "--report", str(tmp_path / "seeds.md"),
        ]
    )  # fmt: skip
    assert code == 0
    data = json.loads(out.read_text())
    assert data["summary"]["functions"] == 3
    for record in data["functions"]:
        coreset, model = record["searches"]["coreset"], record["searches"]["model"]
        assert coreset["trace"][1] == model["trace"][1] == record["oz"]  # -Oz is compiled second
        assert len(coreset["trace"]) == coreset["compilations"]  # every compile recorded
        assert coreset["best_so_far"][-1] == coreset["best_cost"]
        assert 1 <= len(record["model_lists"]) <= 3
    assert "| -Oz + coreset@10 (today) |" in (tmp_path / "seeds.md").read_text()
    assert "median compiles" in capsys.readouterr().out


def test_a_time_limit_reports_what_finished_within_it(tiny_model_dir, labelled_corpus, tmp_path):  # noqa: F811
    out = tmp_path / "seeds.json"
    args = ["--model-dir", str(tiny_model_dir), "--corpus", str(labelled_corpus), "--objective",
            "instruction_count", "--budget", "30", "--workers", "1", "--json-out", str(out)]  # fmt: skip
    assert main([*args, "--time-limit", "0.001"]) == 0  # over before the first sample: nothing searched
    data = json.loads(out.read_text())
    assert (data["meta"]["functions_selected"], data["summary"]["functions"]) == (3, 0)
    assert data["summary"]["variants"]["model"]["final_saved"] is None

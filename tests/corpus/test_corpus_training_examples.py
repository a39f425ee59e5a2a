"""Training examples from a labelled corpus (passlm.examples): the label's answer and its runners-up."""

from __future__ import annotations

from optserve.compiler.pipeline import evaluate
from optserve.corpus.label import LabelConfig, label
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.parallel import ProcessRunner
from optserve.passlm.examples import PASSFORMER_PROFILE, iter_training_records, ranked_servable_lists


def test_ranked_lists_are_servable_cheapest_first_shorter_on_ties():
    known = {("instcombine", "newgvn"): 20, ("sroa", "dse"): 24, ("dse",): 24, ("-Oz",): 30, ("sroa",): 22}
    assert ranked_servable_lists(known, 3) == [(("sroa",), 22), (("dse",), 24), (("sroa", "dse"), 24)]
    assert ranked_servable_lists(known, 1) == [(("sroa",), 22)]


def test_top_answers_add_the_next_cheapest_measured_lists_that_beat_oz(built_corpus):
    layout = CorpusLayout(built_corpus)
    seeds = (("sroa",), ("-O1", "dse"), ("instcombine", "simplifycfg"), ("-O2",), ("mem2reg", "instcombine"))
    config = LabelConfig(budget=30, objectives=("text_size",), seeds=seeds)
    label(layout, layout.shards(), "local", config, ProcessRunner(2), progress=False)
    answers = PASSFORMER_PROFILE.answer_format()
    splits, objectives = ("train", "val", "test"), ("text_size",)
    plain = list(iter_training_records(built_corpus, splits, objectives))
    topped = list(iter_training_records(built_corpus, splits, objectives, top_answers=3))
    assert [r for r in topped if "/top" not in r["id"]] == plain  # the label's own examples are unchanged
    extra = [r for r in topped if "/top" in r["id"]]
    assert extra, "the fixture functions have runners-up that beat -Oz"
    irs = {e["id"]: e["ir"] for shard in layout.shards() for e in _read(shard)}
    main = {r["id"]: r for r in plain}
    for record in extra:
        base_id, rank = record["id"].rsplit("/top", 1)
        assert rank in ("2", "3") and base_id in main
        assert record["prompt"] == main[base_id]["prompt"] and record["answer"] != main[base_id]["answer"]
        assert record["best"] < record["oz"] and record["best"] >= main[base_id]["best"]
        pass_list = answers.parse(record["answer"]).pass_list
        key = base_id.rsplit("/", 1)[0]
        assert evaluate(irs[key], pass_list, "text_size").cost == record["best"]  # measured, not guessed


def _read(shard):
    from optserve.corpus.journal import read_jsonl

    return read_jsonl(shard)

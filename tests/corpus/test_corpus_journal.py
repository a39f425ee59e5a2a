"""The durable progress record: journals survive a torn last line; atomic writes never show a partial file."""

from __future__ import annotations

import asyncio
import json

from optserve.corpus.journal import Journal, journaled, read_jsonl, write_atomic, write_jsonl_atomic


def test_journal_returns_what_was_appended(tmp_path):
    with Journal(tmp_path / "j.jsonl") as journal:
        journal.append({"key": "a", "value": 1})
        journal.append({"key": "b", "value": 2})
    assert Journal(tmp_path / "j.jsonl").records() == {
        "a": {"key": "a", "value": 1},
        "b": {"key": "b", "value": 2},
    }


def test_torn_last_line_is_cut_off_and_appends_continue_cleanly(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps({"key": "a"}) + "\n" + '{"key": "b", "val')  # writer killed mid-line
    journal = Journal(path)
    assert list(journal.records()) == ["a"]
    journal.append({"key": "c"})
    journal.close()
    assert [r["key"] for r in read_jsonl(path)] == ["a", "c"]


def test_missing_journal_is_empty(tmp_path):
    assert Journal(tmp_path / "none.jsonl").records() == {}


def test_atomic_write_replaces_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out" / "shard.jsonl"
    write_atomic(target, "old\n")
    assert write_jsonl_atomic(target, [{"x": 1}, {"x": 2}]) == 2
    assert [r["x"] for r in read_jsonl(target)] == [1, 2]
    assert sorted(p.name for p in target.parent.iterdir()) == ["shard.jsonl"]


def test_journaled_measures_only_what_the_journal_lacks_and_keeps_the_items_order(tmp_path):
    path = tmp_path / "rows.jsonl"
    measured = []

    async def measure(item):
        measured.append(item["id"])
        return None if item["id"] == "skip" else {"id": item["id"], "n": item["n"] * 10}

    items = [{"id": "a", "n": 1}, {"id": "skip", "n": 0}, {"id": "b", "n": 2}]
    first = asyncio.run(journaled(items[:2], measure, path))  # a run killed after its second item
    rows = asyncio.run(journaled(items, measure, path))
    assert first == [{"id": "a", "n": 10}]
    assert rows == [{"id": "a", "n": 10}, {"id": "b", "n": 20}]
    assert measured == ["a", "skip", "skip", "b"]  # a skipped item is not recorded, so it is tried again
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]

"""Tuning profiles: one reviewable, versioned file of a store's lists; byte-identical round trips; a profile
store serves exactly the profile's lists and takes no writes; a bad profile names its file and entry."""

from __future__ import annotations

import dataclasses
import json

import pytest

from optserve.tuning.profile import export_profile, import_profile, profile_text, read_profile
from optserve.tuning.store import TuningStoreError, open_store
from tests.tuning.entries import TOOLCHAIN, function_entry, hash_of, unit_entry

OTHER = dataclasses.replace(TOOLCHAIN, objective="instruction_count")


def _fill(store) -> None:
    store.offer([function_entry(f"f{i}", 50 + i, compiles=i) for i in range(30)])
    store.offer([unit_entry("u1", 900), unit_entry("u0", 800), function_entry("g", 7, toolchain=OTHER)])


def test_a_profile_round_trip_through_a_fresh_store_is_byte_identical(store, tmp_path):
    _fill(store)
    assert export_profile(store, tmp_path / "first.json") == 33
    with open_store(str(tmp_path / "fresh.sqlite3")) as fresh:
        assert import_profile(fresh, tmp_path / "first.json") == 33
        export_profile(fresh, tmp_path / "second.json")
    assert (tmp_path / "first.json").read_bytes() == (tmp_path / "second.json").read_bytes()


def test_a_profile_is_versioned_sorted_json_with_lists_in_text_form(store, tmp_path):
    _fill(store)
    export_profile(store, tmp_path / "profile.json")
    document = json.loads((tmp_path / "profile.json").read_text())
    assert (document["format"], document["version"]) == ("optserve-tuning-profile", 1)
    keys = [(e["objective"], e["kind"], e["ir_hash"]) for e in document["entries"]]
    assert keys == sorted(keys)
    unit = next(e for e in document["entries"] if e["ir_hash"] == hash_of("u0"))
    assert unit["function_lists"] == {"alpha": "-Oz simplifycfg", "beta": "sroa instcombine"}
    assert "ir" not in unit


def test_an_export_of_one_objective_leaves_the_others_out(store, tmp_path):
    _fill(store)
    assert export_profile(store, tmp_path / "ic.json", objectives={"instruction_count"}) == 1
    assert [entry.toolchain for entry in read_profile(tmp_path / "ic.json")] == [OTHER]


def test_a_profile_store_serves_exactly_the_profiles_lists_and_takes_no_writes(store, tmp_path):
    _fill(store)
    export_profile(store, tmp_path / "profile.json")
    with open_store(f"profile:{tmp_path / 'profile.json'}") as profile:
        assert list(profile.entries()) == list(store.entries())
        assert profile.lookup_unit(hash_of("u0"), TOOLCHAIN) == unit_entry("u0", 800)
        assert profile.read_only
        with pytest.raises(TuningStoreError, match="read-only"):
            profile.offer([function_entry("f0", 1)])
        with pytest.raises(TuningStoreError, match="read-only"):
            profile.record_unit(hash_of("u"), "define void @u() { ret void }", "u.c")


def _write(path, document) -> None:
    path.write_text(json.dumps(document))


def test_a_file_of_another_format_is_not_a_profile(tmp_path):
    _write(tmp_path / "p.json", {"format": "llvm-profdata", "version": 1, "entries": []})
    with pytest.raises(TuningStoreError, match=r"p\.json is not a tuning profile"):
        read_profile(tmp_path / "p.json")


def test_a_profile_of_another_version_is_refused_with_what_to_do(tmp_path):
    _write(tmp_path / "p.json", {"format": "optserve-tuning-profile", "version": 2, "entries": []})
    with pytest.raises(TuningStoreError, match=r"version 2; this optserve reads version 1"):
        open_store(f"profile:{tmp_path / 'p.json'}")


def test_a_profile_entry_with_an_unknown_pass_names_the_file_the_entry_and_the_pass(tmp_path):
    document = json.loads(profile_text([function_entry("a", 1), function_entry("b", 2)]))
    document["entries"][1]["pass_list"] = "-Oz instcombin"
    _write(tmp_path / "p.json", document)
    with pytest.raises(
        TuningStoreError,
        match=r"p\.json: entry 2 \(ir_hash [0-9a-f]{64}\): pass_list: unknown pass 'instcombin'",
    ):
        read_profile(tmp_path / "p.json")


def test_a_profile_that_is_not_json_is_refused(tmp_path):
    (tmp_path / "p.json").write_text('{"format": ')
    with pytest.raises(TuningStoreError, match=r"cannot read the tuning profile .*p\.json"):
        read_profile(tmp_path / "p.json")


def test_a_profile_with_one_key_twice_names_both_entries(tmp_path):
    document = json.loads(profile_text([function_entry("a", 1)]))
    document["entries"].append(dict(document["entries"][0], cost=0))
    _write(tmp_path / "p.json", document)
    with pytest.raises(
        TuningStoreError, match=r"entry 2 \(ir_hash [0-9a-f]{64}\) repeats the key of entry 1"
    ):
        read_profile(tmp_path / "p.json")


def test_a_profile_entry_with_a_negative_cost_or_a_missing_field_says_which(tmp_path):
    document = json.loads(profile_text([function_entry("a", 1)]))
    document["entries"][0]["cost"] = -1
    del document["entries"][0]["found_by"]
    _write(tmp_path / "p.json", document)
    with pytest.raises(
        TuningStoreError,
        match=r"entry 1 .*cost: Input should be greater than or equal to 0; found_by: Field required",
    ):
        read_profile(tmp_path / "p.json")

"""optserve.compiler.passes: the vocabulary, the pass-list grammar, and replay with `opt`."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import llvmlite.binding as llvm
import pytest
from hypothesis import given
from hypothesis import strategies as st
from outlines_core import Index, Vocabulary

from optserve.compiler.ir import instruction_count
from optserve.compiler.passes import (
    MAX_PASSES,
    META_FLAGS,
    PASS_LIST_END,
    PASS_LIST_REGEX,
    PASS_NAMES,
    PASS_SPECS,
    PassListError,
    format_pass_list,
    parse_pass_list,
    to_opt_pipeline,
)
from optserve.compiler.pipeline import evaluate, optimize

pass_lists = st.tuples(
    st.one_of(st.just(()), st.sampled_from(META_FLAGS).map(lambda flag: (flag,))),
    st.lists(st.sampled_from(PASS_NAMES), max_size=MAX_PASSES).map(tuple),
).map(lambda parts: parts[0] + parts[1])


def test_vocabulary_is_every_optimization_pass_llvmlite_exposes():
    exposed = {name for name in dir(llvm.ModulePassManager) if name.startswith("add_")}
    not_optimizations = {
        name
        for name in exposed
        if any(word in name for word in ("printer", "viewer", "verifier", "lint", "aa_eval"))
    } | {
        "add_module_debug_info_pass",  # prints debug info
        "add_internalize_pass",
        "add_lower_atomic_pass",
        "add_lower_invoke_pass",
        "add_refprune_pass",
        "add_new_gvn_pass",  # left out on purpose: it miscompiles real code (compiler/passes.py)
    }
    assert {spec.adder for spec in PASS_SPECS} == exposed - not_optimizations
    assert len(PASS_NAMES) == len(set(PASS_NAMES)) == len(exposed - not_optimizations)


@pytest.mark.parametrize("name", PASS_NAMES)
def test_every_pass_runs_on_real_ir(name, c_ir):
    module_ir = (
        c_ir["globals"] if name in {"mergefunc", "constmerge", "globalopt", "deadargelim"} else c_ir["loops"]
    )
    evaluation = evaluate(module_ir, ("-O1", name), "instruction_count", want_ir=True)
    assert evaluation.error is None, evaluation.error
    assert evaluation.cost == instruction_count(evaluation.optimized_ir) > 0


@given(pass_lists)
def test_format_and_parse_are_inverse_and_match_the_grammar(pass_list):
    text = format_pass_list(pass_list)
    assert parse_pass_list(text) == pass_list
    model_output = text + PASS_LIST_END
    assert parse_pass_list(model_output) == pass_list
    assert (re.fullmatch(PASS_LIST_REGEX, model_output) is not None) == bool(pass_list)


@given(
    st.lists(st.sampled_from([*META_FLAGS, *PASS_NAMES[:6], " ", "  ", "x", "-"]), max_size=30).map("".join)
)
def test_parser_and_grammar_agree_on_arbitrary_text(text):
    in_grammar = re.fullmatch(PASS_LIST_REGEX, text + PASS_LIST_END) is not None
    try:
        parsed = parse_pass_list(text)
    except PassListError:
        assert not in_grammar
    else:  # the parser also accepts sloppy whitespace and the empty list; the grammar only canonical lists
        assert in_grammar == (text == format_pass_list(parsed) and parsed != ())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("instcombine -Oz", "meta flag -Oz must come first"),
        ("-O2 -Oz", "meta flag -Oz must come first"),
        ("instcombin", "unknown pass 'instcombin' (did you mean 'instcombine'?)"),
        ("-instcombine", "unknown pass '-instcombine'"),
        ("internalize", "unknown pass 'internalize'"),
        (" ".join(["dce"] * (MAX_PASSES + 1)), f"more than the limit of {MAX_PASSES}"),
    ],
)
def test_invalid_pass_lists_are_rejected_with_a_reason(text, message):
    with pytest.raises(PassListError, match=re.escape(message)):
        parse_pass_list(text)
    assert not re.fullmatch(PASS_LIST_REGEX, text + PASS_LIST_END)


def test_empty_text_is_the_empty_list_but_not_in_the_grammar():
    assert parse_pass_list("") == () and format_pass_list(()) == ""
    assert not re.fullmatch(PASS_LIST_REGEX, PASS_LIST_END)


def test_grammar_works_as_an_outlines_core_index():
    pieces = sorted(
        {*"".join(PASS_NAMES + META_FLAGS), " ", PASS_LIST_END}
        | {f" {name}" for name in PASS_NAMES}
        | {f" {name}{PASS_LIST_END}" for name in PASS_NAMES}
        | set(META_FLAGS)
    )
    token_ids = {piece: index for index, piece in enumerate(pieces)}
    index = Index(PASS_LIST_REGEX, Vocabulary(len(pieces), {piece: [i] for piece, i in token_ids.items()}))

    def accepted(tokens):
        state = index.get_initial_state()
        for token in tokens:
            state = index.get_next_state(state, token_ids[token])
            if state is None:
                return False
        return index.is_final_state(state)

    assert accepted(["-Oz", " instcombine", " ", "d", "c", "e", PASS_LIST_END])
    assert accepted(["s", "r", "o", "a", " dce", " sink\n"])
    assert accepted(["-Oz", PASS_LIST_END])
    assert not accepted(["s", "r", "o", "a"])  # not finished without the newline
    assert not accepted(["s", "r", "o", "a", " ", "-", "O", "z", PASS_LIST_END])
    assert not accepted(["-Oz", " ", PASS_LIST_END])


def test_opt_pipeline_nests_each_pass_like_llvmlite():
    pipeline = to_opt_pipeline(("-Oz", "instcombine", "loop-rotate", "argpromotion", "globalopt", "sroa"))
    assert pipeline == (
        "default<Oz>,function(instcombine),function(loop(loop-rotate)),cgscc(argpromotion),globalopt,"
        "function(sroa<preserve-cfg>)"
    )


OPT = shutil.which("opt-19")


@pytest.mark.skipif(OPT is None, reason="opt-19 (llvm-19) is not installed")
def test_opt_19_accepts_every_pass_and_meta_flag(c_ir, tmp_path):
    source = tmp_path / "loops.ll"
    source.write_text(c_ir["loops"])
    pipeline = to_opt_pipeline(("-O2", *PASS_NAMES[:MAX_PASSES]))
    rest = to_opt_pipeline(PASS_NAMES[MAX_PASSES:])
    for passes in [pipeline, rest, *(to_opt_pipeline((flag,)) for flag in META_FLAGS)]:
        result = subprocess.run(
            [OPT, f"-passes={passes}", "-disable-output", str(source)], capture_output=True
        )
        assert result.returncode == 0, result.stderr.decode()


@pytest.mark.skipif(OPT is None, reason="opt-19 (llvm-19) is not installed")
def test_opt_19_replays_lists_to_the_same_instruction_count(c_ir, tmp_path):
    """LLVM 19's opt and llvmlite's LLVM 20 agree on these lists (the -O2/-O3 pipelines differ on some IR)."""
    rng = random.Random(3)
    for name in ("loops", "switch", "floating", "recursion"):
        source = tmp_path / f"{name}.ll"
        source.write_text(c_ir[name])
        for _ in range(6):
            meta = (rng.choice(("-O1", "-Oz")),) if rng.random() < 0.5 else ()
            pass_list = meta + tuple(rng.choice(PASS_NAMES) for _ in range(rng.randint(1, 5)))
            replayed = subprocess.run(
                [OPT, f"-passes={to_opt_pipeline(pass_list)}", "-S", str(source)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert instruction_count(replayed) == instruction_count(optimize(c_ir[name], pass_list)), (
                pass_list
            )

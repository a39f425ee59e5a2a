"""`optserve dataset ...`: build the IR corpus, label it with the autotuner, write its card, check leakage.

    optserve dataset build    fetch sources, compile, split per function, dedup, split by file, shard
    optserve dataset label    autotune (+ broadcast) labels; process pool, or Ray with --ray; resumable
    optserve dataset card     DATASET_CARD.md and card.json next to the data
    optserve dataset check-leakage   manifest self-check, and outside IR files against the training split
    optserve dataset bundle   pack shards (+ their labels so far) to label on another machine
    optserve dataset stats    the real-code corpus (corpus/real_*.py) and its committed labels; --card

Also runs as `python -m optserve.corpus.cli SUBCOMMAND ...` (how corpus/label_remote.sh calls it on a machine
without the installed package). Settings (optserve/config.py, section `corpus`) are read only for flags left
unset, so a run that passes every flag needs no config file or pydantic.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from optserve.cli import add_json_flag, emit
from optserve.objectives import OBJECTIVE_NAMES

SOURCES_HELP = "gcc-torture, gcc-dg, gcc-common, llvm-transforms, csmith"


def _settings():
    from optserve.config import load_settings

    return load_settings()


def _corpus_dir(args: argparse.Namespace) -> Path:
    return Path(args.corpus) if args.corpus else _settings().corpus.data_dir / "corpus"


def register(subparsers: argparse._SubParsersAction) -> None:
    dataset = subparsers.add_parser(
        "dataset",
        help="build, label and describe the IR corpus",
        description=__doc__.split("\n\n")[0],
    )
    add_dataset_commands(dataset.add_subparsers(dest="dataset_command", metavar="SUBCOMMAND", required=True))


def add_dataset_commands(sub: argparse._SubParsersAction) -> None:
    build = sub.add_parser(
        "build",
        help="build (or resume) the unlabelled corpus",
        description="Fetch the GCC 12 testsuite and LLVM 19 tests from Debian (once), generate csmith "
        "programs, compile with clang-19, split into per-function modules, drop trivial and over-long "
        "functions, "
        "deduplicate, split train/val/test by source file, and write shards, manifest and card. "
        "A killed build resumes from its per-file journal.",
    )
    build.add_argument("--data-dir", help="downloads and sources (default: settings corpus.data_dir = data/)")
    build.add_argument("--corpus", help="output directory (default: <data-dir>/corpus)")
    build.add_argument("--sources", help=f"comma-separated subset of: {SOURCES_HELP} (default: all)")
    build.add_argument("--min-instructions", type=int, help="drop functions with fewer (default 4)")
    build.add_argument(
        "--max-bytes", type=int, help="drop functions whose normalized IR is longer (default 8192)"
    )
    build.add_argument("--val-percent", type=int, help="share of source files for validation (default 5)")
    build.add_argument("--test-percent", type=int, help="share of source files for test (default 5)")
    build.add_argument("--csmith-programs", type=int, help="csmith seeds 1..N (default 2000)")
    build.add_argument(
        "--limit-per-source", type=int, help="only the first N files of each source (quick runs)"
    )
    build.add_argument("--shard-size", type=int, help="examples per shard (default 1000)")
    build.add_argument(
        "--workers", type=int, default=os.cpu_count(), help="compile processes (default: all cores)"
    )
    build.add_argument("--no-function-files", action="store_true", help="skip writing functions/**/*.ll")
    build.add_argument(
        "--debian-mirror",
        help="Debian archive URI for the llvm-toolchain-19 source package "
        "(default: the archive in the system's apt sources, or $OPTSERVE_DEBIAN_MIRROR)",
    )
    build.add_argument(
        "--snapshot",
        action="store_true",
        help="compile nothing: write shards, manifest and card from the files compiled so far "
        "(safe while a build is running)",
    )
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(build)
    build.set_defaults(handler=_build)

    label = sub.add_parser(
        "label",
        help="label corpus functions with the autotuner (+ broadcast)",
        description="Autotune every function of the chosen shards for both objectives (random search with a "
        "compile budget, -Oz floor, minimization), then broadcast every unique best list within each split. "
        "Runs on a local process pool, or as Ray tasks with --ray. Finished functions are journaled: a "
        "killed run resumes without losing or repeating them.",
    )
    label.add_argument("--corpus", help="corpus directory (default: data/corpus)")
    label.add_argument(
        "--stage",
        choices=("autotune", "broadcast", "all", "local", "measure"),
        default="all",
        help="all = autotune then broadcast; local = local search from --seeds (real code); measure = the "
        "cost of every --seeds list, no search (a coreset chosen after labelling)",
    )
    label.add_argument(
        "--seeds",
        type=Path,
        help="stage local: JSON list of pass lists to try first (a coreset); stage measure: the lists to "
        "measure",
    )
    label.add_argument("--top-k", type=int, default=5, help="stage local: distinct best lists kept per label")
    label.add_argument("--splits", default="train,val,test", help="comma-separated splits (default: all)")
    label.add_argument("--shards", nargs="+", metavar="GLOB", help="shard names to label, e.g. 'train-0000?' "
                       "'val-00000' (default: every shard of the splits)")  # fmt: skip
    label.add_argument("--limit", type=int, help="only the first N functions of each shard (a sample)")
    label.add_argument("--budget", type=int, help="compilations per function and objective (default 1000)")
    label.add_argument("--objectives", default=",".join(OBJECTIVE_NAMES), help="comma-separated")
    label.add_argument("--workers", type=int, help="local processes (default: all cores)")
    label.add_argument(
        "--ray", metavar="ADDRESS", help="run as Ray tasks on this cluster ('local' starts one)"
    )
    label.add_argument("--time-limit", type=float, help="stop after this many seconds (resume later)")
    label.add_argument("--function-time-limit", type=float, help="search seconds per function and objective")
    label.add_argument("--candidate-timeout", type=float, help="seconds per candidate compile (default 20)")
    label.add_argument("--broadcast-lists", type=int, default=0, help="broadcast only the K lists that were "
                       "best most often (default 0: every unique best list)")  # fmt: skip
    label.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(label)
    label.set_defaults(handler=_label)

    card = sub.add_parser("card", help="write DATASET_CARD.md and card.json next to the data")
    card.add_argument("--corpus", help="corpus directory (default: data/corpus)")
    add_json_flag(card)
    card.set_defaults(handler=_card)

    leak = sub.add_parser(
        "check-leakage",
        help="check the manifest, and outside IR files against the training split",
        description="Fails (exit 1) if an example id or source file is in two splits, or if any given .ll "
        "file (or directory of them) normalizes to a function of the training split.",
    )
    leak.add_argument("paths", nargs="*", type=Path, help=".ll files or directories (an evaluation set)")
    leak.add_argument("--corpus", help="corpus directory (default: data/corpus)")
    leak.add_argument("--split", default="train", help="the split that must not contain them (default train)")
    add_json_flag(leak)
    leak.set_defaults(handler=_check_leakage)

    stats = sub.add_parser(
        "stats",
        help="what the real-code corpus and its committed labels hold",
        description="Counts per package kind, split, granularity and objective; label budgets; the share "
        "of -Oz saved by the labels; token lengths of whole units (bundled tokenizer). --card writes the "
        "dataset card (provenance, licence per package, rebuild commands).",
    )
    stats.add_argument(
        "--root", type=Path, default=Path("data/real"), help="real-code root (default data/real)"
    )
    stats.add_argument("--store", type=Path, default=Path("data/labels/real"), help="committed label store")
    stats.add_argument("--card", type=Path, help="also write the dataset card here")
    add_json_flag(stats)
    stats.set_defaults(handler=_stats)

    bundle = sub.add_parser(
        "bundle",
        help="pack shards and their labels so far for labelling on another machine",
        description="Writes a .tar.xz with the chosen example shards and the corpus' label files, to carry "
        "to the lent machine (corpus/label_remote.sh unpacks it, labels, and packs labels back).",
    )
    bundle.add_argument("--corpus", help="corpus directory (default: data/corpus)")
    bundle.add_argument(
        "--shards", nargs="+", required=True, metavar="GLOB", help="shard names, e.g. 'train-0000?'"
    )
    bundle.add_argument("--out", type=Path, default=Path(".carry/label_bundle.tar.xz"))
    bundle.add_argument(
        "--labels",
        choices=("all", "own", "none"),
        default="all",
        help="label files to pack: all (stage broadcast needs them), own (the bundled shards' and the seed "
        "sets: enough to resume stages local and measure; smaller), none",
    )
    add_json_flag(bundle)
    bundle.set_defaults(handler=_bundle)

    merge = sub.add_parser(
        "merge",
        help="bring a labeller's returned archive home (label_remote.sh's NAME.tar.xz)",
        description="Adds each example's labels of the objectives the corpus lacks, keeping what it has: two "
        "labellers that searched the same shards for different objectives merge in either order.",
    )
    merge.add_argument("--corpus", help="corpus directory (default: data/corpus)")
    merge.add_argument("archives", nargs="+", type=Path, metavar="ARCHIVE", help="returned .tar.xz files")
    add_json_flag(merge)
    merge.set_defaults(handler=_merge)


def _build(args: argparse.Namespace) -> int:
    from optserve.corpus.build import BuildConfig, build_corpus
    from optserve.corpus.card import write_card
    from optserve.corpus.functions import DropRules
    from optserve.corpus.layout import CorpusLayout
    from optserve.corpus.sources import SOURCE_NAMES

    settings = _settings().corpus
    data_dir = Path(args.data_dir) if args.data_dir else settings.data_dir
    sources = tuple(s.strip() for s in args.sources.split(",")) if args.sources else SOURCE_NAMES
    unknown = set(sources) - set(SOURCE_NAMES)
    if unknown:
        print(
            f"error: unknown source(s) {', '.join(sorted(unknown))}; choose from {SOURCES_HELP}",
            file=sys.stderr,
        )
        return 2
    config = BuildConfig(
        data_dir=data_dir,
        out_dir=Path(args.corpus) if args.corpus else data_dir / "corpus",
        sources=sources,
        rules=DropRules(
            min_instructions=_pick(args.min_instructions, settings.min_instructions),
            max_bytes=_pick(args.max_bytes, settings.max_function_bytes),
        ),
        val_percent=_pick(args.val_percent, settings.val_percent),
        test_percent=_pick(args.test_percent, settings.test_percent),
        compile_timeout_s=settings.compile_timeout_s,
        csmith_programs=_pick(args.csmith_programs, settings.csmith_programs),
        shard_size=_pick(args.shard_size, settings.shard_size),
        workers=args.workers or 1,
        limit_per_source=args.limit_per_source,
        write_function_files=not args.no_function_files,
        debian_mirror=args.debian_mirror,
    )
    log = (lambda _msg: None) if args.json else (lambda msg: print(msg, file=sys.stderr))
    stats = build_corpus(
        config, progress=not (args.quiet or args.json), log=log, compile_more=not args.snapshot
    )
    write_card(CorpusLayout(config.out_dir), command=shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]))
    result = {"corpus": str(config.out_dir), "splits": stats["splits"], "total": stats["total"],
              "sources": stats["sources"], "timing": stats["timing"]}  # fmt: skip
    emit(result, args.json, _render_build)
    return 0


def _render_build(result: dict[str, Any]) -> str:
    lines = [f"corpus: {result['corpus']}  ({result['total']} examples; splits {result['splits']})"]
    for source, c in result["sources"].items():
        kept = {k.removeprefix("kept_"): v for k, v in c.items() if k.startswith("kept_")}
        lines.append(f"  {source}: {c.get('files_ok', 0)}/{c.get('files', 0)} files compiled, "
                     f"{c.get('functions', 0)} functions, kept {kept}")  # fmt: skip
    lines.append(f"  time: {result['timing']}")
    return "\n".join(lines)


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def _select_shards(layout, splits: tuple[str, ...], patterns: list[str] | None) -> list[Path]:
    shards = layout.shards(splits)
    if patterns:
        shards = [s for s in shards if any(fnmatch.fnmatch(s.stem, p) for p in patterns)]
    return shards


def _label(args: argparse.Namespace) -> int:
    from optserve.corpus.label import OBJECTIVES, LabelConfig, label
    from optserve.corpus.layout import CorpusLayout
    from optserve.corpus.parallel import make_runner

    layout = CorpusLayout(_corpus_dir(args))
    splits = tuple(s.strip() for s in args.splits.split(","))
    shards = _select_shards(layout, splits, args.shards)
    if not shards:
        print(f"error: no shards match in {layout.examples_dir} (build the corpus first?)", file=sys.stderr)
        return 2
    objectives = tuple(o.strip() for o in args.objectives.split(","))
    if set(objectives) - set(OBJECTIVES):
        print(f"error: objectives must be among {', '.join(OBJECTIVES)}", file=sys.stderr)
        return 2
    budget = args.budget if args.budget is not None else _settings().corpus.label_budget
    timeout = (
        args.candidate_timeout
        if args.candidate_timeout is not None
        else _settings().compiler.candidate_timeout_s
    )
    config = LabelConfig(
        budget=budget,
        objectives=objectives,
        candidate_timeout_s=timeout,
        function_time_limit_s=args.function_time_limit,
        broadcast_lists=args.broadcast_lists,
        limit_per_shard=args.limit,
        seeds=_seed_lists(args.seeds),
        top_k=args.top_k,
    )
    if config.seeds:  # the labels name their seed set by fingerprint; keep the lists next to them
        from optserve.corpus.label import seeds_fingerprint
        from optserve.corpus.label_store import write_seed_set

        write_seed_set(layout.labels_dir / "local" / "seeds", seeds_fingerprint(config.seeds), config.seeds)
    runner = make_runner(args.workers, args.ray)
    log = (lambda _msg: None) if args.json else (lambda msg: print(msg, file=sys.stderr))
    stages = ("autotune", "broadcast") if args.stage == "all" else (args.stage,)
    results = []
    remaining = args.time_limit
    try:
        for stage in stages:
            summary = label(
                layout,
                shards,
                stage,
                config,
                runner,
                remaining,
                progress=not (args.quiet or args.json),
                log=log,
            )
            results.append(
                {
                    "stage": stage,
                    "functions": summary.functions,
                    "skipped": summary.skipped,
                    "failed": summary.failed,
                    "compilations": summary.compilations,
                    "seconds": round(summary.seconds, 1),
                    "compilations_per_second": round(summary.compilations_per_second, 1),
                    "shards_completed": len(summary.shards_completed),
                    "stopped_early": summary.stopped_early,
                }
            )
            if summary.stopped_early:
                break
            if remaining is not None:
                remaining = max(1.0, remaining - summary.seconds)
    finally:
        runner.shutdown()
    emit(
        {"corpus": str(layout.root), "workers": runner.workers, "budget": budget, "stages": results},
        args.json,
    )
    return 0


def _seed_lists(path: Path | None) -> tuple[tuple[str, ...], ...]:
    """Pass lists from a JSON file: a list of lists, {"lists": [...]}, or a coreset (corpus/coreset.py)."""
    if path is None:
        return ()
    import json

    data = json.loads(path.read_text())
    if isinstance(data, dict) and "objectives" in data:  # a coreset: its objectives' lists, in order, once
        lists = [item for items in data["objectives"].values() for item in items]
    else:
        lists = data["lists"] if isinstance(data, dict) else data
    seeds = (tuple(item["passes"] if isinstance(item, dict) else item) for item in lists)
    return tuple(dict.fromkeys(seeds))


def _card(args: argparse.Namespace) -> int:
    from optserve.corpus.card import write_card
    from optserve.corpus.layout import CorpusLayout

    layout = CorpusLayout(_corpus_dir(args))
    if not layout.manifest.exists():
        print(f"error: no corpus at {layout.root} (run `optserve dataset build`)", file=sys.stderr)
        return 2
    numbers = write_card(layout)
    if args.json:
        emit(numbers, True)
    else:
        print(f"wrote {layout.card} ({numbers['split_totals']})")
    return 0


def _check_leakage(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from optserve.corpus.layout import CorpusLayout
    from optserve.corpus.leakage import check_against

    layout = CorpusLayout(_corpus_dir(args))
    if not layout.manifest.exists():
        print(f"error: no manifest at {layout.manifest}", file=sys.stderr)
        return 2
    report = check_against(layout, args.paths, args.split)
    emit({"clean": report.clean, **asdict(report)}, args.json)
    return 0 if report.clean else 1


def _stats(args: argparse.Namespace) -> int:
    from optserve.corpus.real_stats import corpus_stats, write_card

    tokenizer = _settings().engine.model_dir
    result = corpus_stats(args.root, args.store, tokenizer)
    if args.card:
        write_card(args.root, result, args.card)
    emit(result, args.json)
    return 0


def _bundle(args: argparse.Namespace) -> int:
    from optserve.corpus.layout import CorpusLayout
    from optserve.corpus.remote import make_bundle

    layout = CorpusLayout(_corpus_dir(args))
    shards = _select_shards(layout, ("train", "val", "test"), args.shards)
    if not shards:
        print("error: no shards match", file=sys.stderr)
        return 2
    size = make_bundle(layout, shards, args.out, labels=args.labels)
    emit({"bundle": str(args.out), "shards": [s.name for s in shards], "bytes": size}, args.json)
    return 0


def _merge(args: argparse.Namespace) -> int:
    import lzma
    import tarfile

    from optserve.corpus.layout import CorpusLayout
    from optserve.corpus.remote import merge_returned

    layout = CorpusLayout(_corpus_dir(args))
    missing = [str(a) for a in args.archives if not a.is_file()]
    if missing:
        print(f"error: no such archive: {', '.join(missing)}", file=sys.stderr)
        return 2
    gained = {}
    for archive in args.archives:
        try:
            gained[str(archive)] = merge_returned(layout, archive)
        except (tarfile.TarError, lzma.LZMAError, EOFError) as error:  # merging again is harmless
            print(f"error: {archive} is not a labeller's archive ({error})", file=sys.stderr)
            return 2
    emit({"corpus": str(layout.root), "gained": gained}, args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m optserve.corpus.cli SUBCOMMAND ...` (the dataset subcommands without the `optserve` CLI)."""
    parser = argparse.ArgumentParser(
        prog="python -m optserve.corpus.cli", description=__doc__.split("\n\n")[0]
    )
    add_dataset_commands(parser.add_subparsers(dest="dataset_command", metavar="SUBCOMMAND", required=True))
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

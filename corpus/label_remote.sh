#!/usr/bin/env bash
# Label corpus shards on the lent 16-core machine, which has no Ray, no optserve install and a different
# llvmlite (LLVM 22): labels must come from OUR llvmlite 0.47 (LLVM 20.1.8), the one the service uses.
#
# Runs in the repository root on that machine (the `run` tool copies the working tree there):
#   corpus/label_remote.sh BUNDLE STAGE SECONDS [more `dataset label` flags]
#     BUNDLE   a bundle from `optserve dataset bundle` (carried, e.g. .carry/label_bundle.tar.xz)
#     STAGE    autotune | broadcast | all
#     SECONDS  labelling time limit; keep it ~90 s under the call's limit (unpacking and packing take time);
#              for whole units also pass --function-time-limit (a unit's search can outlast the limit)
# LABEL_WORKERS (default: every core) leaves cores to a job beside it (passlm/train_remote.sh trains on the GPU).
# LABEL_NAME (default: labels) names the work folder and the packed file, so two labellers (say, test shards at
# budget 1000 beside val shards at a lower one) can share one call.
# Needs .carry/llvmlite047.tar.xz (how to make it: docs/bench/corpus.md, "Labelling on the 16-core machine") in
# the first call on a machine; later calls while it stays warm use the copy unpacked in .lent/.
# Writes $OUT/$LABEL_NAME.tar.xz, one file (the run tool brings back at most 8), with the labeller's JSON summary
# as summary.json: merge it into the corpus here (`optserve dataset merge --corpus data/corpus .../NAME.tar.xz`);
# a run cut short leaves journals in it, and the next bundle carries them back, so nothing is redone.
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
bundle=$1 stage=$2 seconds=$3
shift 3
out=${OUT:-/tmp/label-out}
name=${LABEL_NAME:-labels}
pkg=/tmp/optserve-pkg-$name
work=/tmp/optserve-corpus-$name
mkdir -p "$out" "$pkg/optserve" "$work"

# llvmlite is unpacked once per machine into .lent/ (git-ignored: the `run` tool keeps it there while the
# machine stays warm), so a later call on the same machine need not carry its 35 MB again: that room is what a
# training call's data needs (passlm/train_remote.sh). flock: two labellers of one call unpack it once.
site=$PWD/.lent/llvmlite047
mkdir -p .lent
(
  flock 9
  if [ ! -f "$site/.unpacked" ]; then
    if [ ! -f .carry/llvmlite047.tar.xz ]; then
      echo "no llvmlite 0.47 on this machine: carry .carry/llvmlite047.tar.xz (once per warm machine)" >&2
      exit 2
    fi
    rm -rf "$site" && mkdir -p "$site" && tar xJf .carry/llvmlite047.tar.xz -C "$site" && touch "$site/.unpacked"
  fi
) 9>.lent/llvmlite.lock
# The package layout pyproject.toml declares (compiler/ -> optserve.compiler, corpus/ -> optserve.corpus),
# without installing anything: symlinks next to a copy of optserve/.
cp -r optserve/. "$pkg/optserve/"
ln -sfn "$PWD/compiler" "$pkg/optserve/compiler"
ln -sfn "$PWD/corpus" "$pkg/optserve/corpus"
export PYTHONPATH="$pkg:$site${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import llvmlite, llvmlite.binding as llvm; assert llvmlite.__version__ == "0.47.0", llvmlite.__version__; print("llvmlite", llvmlite.__version__, "LLVM", llvm.llvm_version_info)'

tar xJf "$bundle" -C "$work"
# From $pkg: `python -m` puts the working directory first on sys.path, and the repository root's optserve/
# lacks the compiler/ and corpus/ subpackages. Every flag is given, so no settings file (no pydantic) is read.
# Under `timeout`: whatever happens to the labeller (a unit that outlasts the time limit, a hang), the labels
# journaled so far are packed below. Journals are written per finished item, so a killed run loses nothing else.
(cd "$pkg" && timeout --kill-after=10 "$((seconds + 30))" python3 -m optserve.corpus.cli label --corpus "$work" \
  --stage "$stage" --time-limit "$seconds" --workers "${LABEL_WORKERS:-$(nproc)}" --budget 1000 --candidate-timeout 20 --quiet \
  --json "$@") | tee "$work/summary.json" || echo "labeller stopped by timeout; packing its journals" >&2

# Pack back only the labels of the bundled shards: the other label files in the bundle are stale copies that
# must not overwrite newer ones at home.
(
  cd "$work"
  for shard in examples/*.jsonl; do
    name=$(basename "$shard" .jsonl)
    ls labels/*/"$name".jsonl labels/*/"$name".journal.jsonl 2>/dev/null || true
  done
  [ "$stage" = autotune ] || ls labels/broadcast/lists-*.json 2>/dev/null || true
  ls labels/local/seeds/*.json 2>/dev/null || true
  ls summary.json 2>/dev/null || true
) > "$work/returned.txt"
tar cJf "$out/$name.tar.xz" -C "$work" -T "$work/returned.txt"
ls -l "$out"

#!/usr/bin/env bash
# The IR-intake fuzzing campaign (benchmarks/reliability_campaign.py) on the lent host: 16 cores, Python 3.12,
# no clang, no Ray, another llvmlite. Runs in the repository root there (the `run` tool copies the tree; carry
# .carry/llvmlite047.tar.xz, our llvmlite 0.47 = LLVM 20.1.8, unpacked once per warm machine into .lent/, and
# the earlier calls' output folders under runs/reliability_campaign/ to resume from):
#   benchmarks/reliability_campaign_lent.sh run SEED TOTAL [TIME_LIMIT]   # chunk lines -> $OUT/run.tar.gz
#   benchmarks/reliability_campaign_lent.sh minimize SECONDS             # -> $OUT/minimized.json
# (at most 8 files come back from a call: the workers' chunk lines travel as one archive; unpack it here
# into runs/reliability_campaign/NAME/ and carry runs/reliability_campaign to resume or minimize.)
# Only compiler/ir.py and the fuzzing helpers (optserve/testing/fuzz/) of optserve are needed (through an
# `optserve` namespace of symlinks); the seeds are committed (tests/data/reliability/bitcode_seeds,
# tests/data/**/*.ll), so inputs match this machine's.
set -euo pipefail
out=${OUT:-/tmp/campaign-out}
llvm=$PWD/.lent/llvmlite047
mkdir -p .lent "$out"
if [ ! -f "$llvm/.unpacked" ]; then
  rm -rf "$llvm" && mkdir -p "$llvm" && tar xJf .carry/llvmlite047.tar.xz -C "$llvm" && touch "$llvm/.unpacked"
fi
ns=/tmp/campaign-ns/optserve
mkdir -p "$ns"
ln -sfn "$PWD/optserve/__init__.py" "$ns/__init__.py"
ln -sfn "$PWD/compiler" "$ns/compiler"
ln -sfn "$PWD/optserve/testing" "$ns/testing"
export PYTHONPATH=$llvm:/tmp/campaign-ns:$PWD
python=${PYTHON:-python3}
earlier=$(ls -d runs/reliability_campaign/*/ 2>/dev/null || true)
case $1 in
  run)
    # shellcheck disable=SC2086
    work=/tmp/campaign-work && rm -rf "$work" && mkdir -p "$work"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 nice -n 5 $python benchmarks/reliability_campaign.py run --seed "$2" --total "$3" \
      --time-limit "${4:-500}" --out "$work/run" --done $earlier
    tar -C "$work" -czf "$out/run.tar.gz" run
    ;;
  minimize)
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 nice -n 5 $python benchmarks/reliability_campaign.py minimize $earlier --seconds "$2" \
      --out "$out"
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Engine latency, torch backend, on the lent GPU (which has no optserve install, no clang, no pydantic/
# outlines_core, Python 3.12 and a different llvmlite): everything the engine imports travels in .carry/.
#
#   benchmarks/engine_gpu_run.sh prepare               # here: the benchmark's functions -> .carry/engine_gpu_functions.json
#   benchmarks/engine_gpu_run.sh bench DEVICE [MODEL_DIR [JSON_OUT]]   # there (DEVICE cuda) or here (cpu)
#   benchmarks/engine_gpu_run.sh render JSON [DOC]     # here: markdown section (appended to DOC if given)
#
# `bench` needs .carry/llvmlite047.tar.xz (docs/bench/corpus.md) and .carry/engine_deps.tar.xz: pydantic,
# pydantic_core, annotated_types, typing_extensions, typing_inspection, outlines_core from .venv, with the
# cp312 builds of the two compiled ones (pydantic_core 2.50.4, outlines_core 0.2.14) added next to the cp311
# ones, so the same tarball imports under Python 3.11 (here) and 3.12 (there). How it was made:
# docs/bench/engine.md, "torch backend on the lent GPU". Set PYTHON to choose the interpreter (default python3).
set -euo pipefail

mode=${1:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
functions_json=$repo/.carry/engine_gpu_functions.json
python=${PYTHON:-python3}

case "$mode" in
prepare)
  # The functions of benchmarks/engine_bench.py (clang-19 -O0 of tests/data/c, normalized IR <= 2 KB).
  cd "$repo"
  python -c "
import json
from pathlib import Path
from optserve.passlm.evaluation import engine_latency
json.dump(engine_latency.small_functions(Path('tests/data/c'), 2048, 6), open('$functions_json', 'w'))
print('$functions_json')"
  ;;
bench)
  device=${2:?device}
  model_dir=${3:-$repo/models/passformer}
  json_out=${4:-${OUT:-/tmp}/engine_gpu.json}
  model_dir=$(cd "$model_dir" && pwd)
  json_out=$(cd "$(dirname "$json_out")" && pwd)/$(basename "$json_out")
  export HF_HUB_OFFLINE=1
  site=/tmp/optserve-engine-site
  pkg=/tmp/optserve-engine-pkg
  rm -rf "$pkg" && mkdir -p "$site" "$pkg/optserve"
  tar xJf "$repo/.carry/llvmlite047.tar.xz" -C "$site"
  tar xJf "$repo/.carry/engine_deps.tar.xz" -C "$site"
  # The package layout pyproject.toml declares, without installing anything (as corpus/label_remote.sh).
  cp -r "$repo/optserve/." "$pkg/optserve/"
  for area in compiler engine passlm; do ln -sfn "$repo/$area" "$pkg/optserve/$area"; done
  export PYTHONPATH="$pkg:$site${PYTHONPATH:+:$PYTHONPATH}"
  cd "$pkg"  # not the repository root: its optserve/ lacks the area subpackages
  REPO=$repo "$python" - "$device" "$model_dir" "$functions_json" "$json_out" <<'EOF'
import asyncio, json, os, platform, statistics, subprocess, sys, time
from pathlib import Path

import torch

from optserve.passlm.evaluation import engine_latency  # the CPU benchmark's strategies and measurement loop
from optserve.engine.engine import ModelEngine

device, model_dir, functions_json, json_out = sys.argv[1:5]
functions = [tuple(f) for f in json.load(open(functions_json))]
import llvmlite, outlines_core, pydantic
print("python", platform.python_version(), "torch", torch.__version__, "llvmlite", llvmlite.__version__,
      "pydantic", pydantic.VERSION, "from", [m.__file__ for m in (llvmlite, outlines_core, pydantic)], flush=True)


def sync():
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def components(engine):
    """Prefill of each prompt and one decoding step, on the device (synchronized)."""
    network = engine.decoder.network
    dev = engine.decoder.device
    prefills, steps = [], []
    with torch.inference_mode():
        for _, ir in functions:
            prompt = torch.tensor([engine.prompt_ids(ir)], device=dev)
            length = prompt.shape[1]
            for _ in range(5):
                cache = network.new_cache(length + 64)
                sync(); started = time.perf_counter()
                network.forward(cache, prompt, torch.arange(length, device=dev)[None], None)
                sync(); prefills.append(time.perf_counter() - started)
            token = prompt[:, -1:]
            for position in range(length, length + 20):
                sync(); started = time.perf_counter()
                network.forward(cache, token, torch.tensor([[position]], device=dev), None)
                sync(); steps.append(time.perf_counter() - started)
    return {"prefill_p50_s": statistics.median(prefills), "step_p50_s": statistics.median(steps)}


async def one(dtype_name):
    started = time.perf_counter()
    engine = ModelEngine.load(model_dir, backend="torch", device=device, dtype=getattr(torch, dtype_name))
    load_s = time.perf_counter() - started

    async def no_cache():
        pass

    try:
        results = await engine_latency.measure(engine, functions, no_cache, False)
        results["components"] = components(engine)
        results["network"] = type(engine.decoder.network).__name__.strip("_")
    finally:
        await engine.close()
    results["load_s"] = load_s
    return results


report = {
    "date": subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip(),
    "device": torch.cuda.get_device_name() if device.startswith("cuda") else f"cpu ({os.cpu_count()} cores)",
    "python": platform.python_version(), "torch": torch.__version__,
    "model_dir": model_dir, "functions": [name for name, _ in functions], "results": {},
}
for dtype_name in ("float32", "bfloat16"):
    print(f"{device} {dtype_name}:", flush=True)
    report["results"][dtype_name] = asyncio.run(one(dtype_name))
    Path(json_out).write_text(json.dumps(report, indent=1))
print(json.dumps({d: {k: round(v["p50_s"] * 1000, 1) for k, v in r.items() if isinstance(v, dict) and "p50_s" in v}
                  for d, r in report["results"].items()}))
EOF
  ;;
render)
  json=${2:?json}
  doc=${3:-}
  cd "$repo"
  python - "$json" "$doc" <<'EOF'
import json, sys
from optserve.passlm.evaluation import engine_latency

report = json.load(open(sys.argv[1]))
lines = [
    f"## Inference engine: torch backend on {report['device']}",
    "",
    f"- Date: {report['date']}; Python {report['python']}, torch {report['torch']}; model {report['model_dir']}",
    f"- Command: `benchmarks/engine_gpu_run.sh bench cuda` (the 6 functions of engine_bench.py: "
    f"{', '.join(report['functions'])}); instruction counts not decoded; cold cache per request.",
    "",
    "| strategy | dtype | p50 (ms) | p99 (ms) | model tokens / request | unique candidates / request |",
    "|---|---|---:|---:|---:|---:|",
]
for label in engine_latency.STRATEGIES:
    for dtype, results in report["results"].items():
        r = results[label]
        lines.append(f"| {label} | {dtype} | {r['p50_s'] * 1000:.1f} | {r['p99_s'] * 1000:.1f} | "
                     f"{r['tokens_per_request']:.0f} | {r['unique_per_request']:.1f} |")
lines.append("")
for dtype, results in report["results"].items():
    c = results["components"]
    lines.append(f"- {dtype}: engine start {results['load_s']:.1f} s; prefill of a prompt (p50) "
                 f"{c['prefill_p50_s'] * 1000:.2f} ms, one decoding step {c['step_p50_s'] * 1000:.2f} ms "
                 f"({results['network']}).")
markdown = "\n".join(lines) + "\n"
print(markdown)
if sys.argv[2]:
    with open(sys.argv[2], "a") as out:
        out.write("\n" + markdown)
EOF
  ;;
*)
  sed -n '2,13p' "$0" >&2
  exit 2
  ;;
esac

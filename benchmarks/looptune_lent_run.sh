#!/usr/bin/env bash
# One lent-machine call (Xeon, 16 cores): train the LoopTune policy on core 0 (+ GPU for the updates) while
# the 60 s searches and numpy run on cores 1-15; then pick the better of the DQN-trained and the
# imitation-only network on 96 training shapes (measured), and evaluate the policy on the whole test split.
#   carry: .carry/llvmlite047.tar.xz data/looptune/measured.json.gz
#   bash benchmarks/looptune_lent_run.sh <iterations> <search seconds> <search shapes> <DQN seconds>
ITER=${1:-700}; SEARCH_S=${2:-60}; SHAPES=${3:-20}; TRAIN_S=${4:-180}
REPO=$PWD
source benchmarks/looptune_lent_setup.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT /tmp/ltrun
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
DEV=$(python3 -c "import torch; torch.zeros(1).cuda(); print('cuda')" 2>/dev/null || echo cpu)
(taskset -c 0 python3 -u -m optserve.policies.train --data $REPO/data/looptune/measured.json.gz \
  --run /tmp/ltrun --bundle /tmp/ltrun/final_policy --iterations $ITER --time-budget-s $TRAIN_S --device $DEV --threads 1 \
  > /tmp/ltrun/train.log 2>&1; echo "train exit $?" >> /tmp/ltrun/train.log) &
TRAIN=$!
EVAL="python3 -m optserve.policies.cli eval looptune --jobs 15 --first-core 1"
$EVAL --split test --search-shapes $SHAPES --search-time $SEARCH_S --parts searches,numpy \
  --json-out $OUT/eval_searches.json > /tmp/ltrun/searches.log 2>&1
echo "searches done at $(date -u), training on $DEV"; wait $TRAIN; grep -v "^{" /tmp/ltrun/train.log | tail -5
tail -2 /tmp/ltrun/learning_curve.csv
for v in final_policy pretrained_policy; do
  $EVAL --split train --parts policy --policy-shapes 96 --policy /tmp/ltrun/$v/policy.pt \
    --json-out /tmp/ltrun/val_$v.json > /dev/null 2>&1
done
BEST=$(python3 - <<'PY'
import json, math
def score(v):
    rows = [r for r in json.load(open(f"/tmp/ltrun/val_{v}.json"))["results"] if r["method"] == "policy"]
    return math.exp(sum(math.log(max(r["polish_gflops"], 1e-3)) for r in rows) / len(rows))
scores = {v: score(v) for v in ("final_policy", "pretrained_policy")}
print(max(scores, key=scores.get), json.dumps(scores))
PY
)
echo "validation (geomean polish GFLOPS, 96 train shapes): $BEST"; BEST=${BEST%% *}
cp /tmp/ltrun/$BEST/* $REPO/models/looptune/ 2>/dev/null || { mkdir -p $REPO/models/looptune; cp /tmp/ltrun/$BEST/* $REPO/models/looptune/; }
cp /tmp/ltrun/final_policy/cost_model.* $REPO/models/looptune/
echo "$BEST" > /tmp/ltrun/selected.txt
$EVAL --split test --parts policy --json-out $OUT/eval_policy.json > /tmp/ltrun/policy.log 2>&1
tail -3 /tmp/ltrun/policy.log
tar czf $OUT/looptune_train.tgz -C /tmp/ltrun --exclude=checkpoint.pt . && ls -la $OUT

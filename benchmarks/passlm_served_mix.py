"""What the service would answer per function when a model's candidates are compiled beside the coreset's:
the served mixes, from `optserve eval passes` journals (passlm/evaluation/served_mix.py says how).

    python benchmarks/passlm_served_mix.py --coreset-journal runs/eval14/v3_all.journal.jsonl \
        runs/eval14/v3_all.journal.jsonl runs/eval16/v9_run0.journal.jsonl
"""

from optserve.passlm.evaluation.served_mix import main

if __name__ == "__main__":
    raise SystemExit(main())

"""`optserve eval passes`: a pass-ordering model measured the way the thesis measures it (ch. 4, Table 6.1).

For every labelled function of a split, each method yields an ordered list of candidate pass lists, drawn
once at the largest sample count N (priority sampling is deterministic; nucleus draws and random lists use
fixed seeds), and every candidate is compiled. The metrics at n samples then read the first n candidates:

- improvement over -Oz: sum over functions of (oz_cost - best cost among the first n) / sum of oz_cost, in %.
  Without backup a function with no compiling candidate keeps its unoptimized cost; with backup the -Oz
  candidate is included (best = min(best, oz_cost)), so nothing regresses.
- functions improved / regressed (best < / > oz_cost, without backup);
- validity: the share of candidates that compile;
- MAPE of the instruction counts the model writes: "before" against the unoptimized count, "after" against
  the measured cost of that same pass list.

n counts samples as the thesis does: priority sampling's first n (unique) samples, random lists' first n
(unique) lists, nucleus sampling's unique candidates among n draws (drawn for each n, with the same seed).
The autotuner row is the label's best cost.

Per (function, method) results are journaled as they finish, with a fingerprint of what produced them (model
weights, method, seeds, objective), so a killed run resumes without repeating finished work and a changed
model never mixes with old results. Generation of one function overlaps the compilation of the previous one.

Modules, one job each: `methods` (what a method is, the run's configuration), `metrics` (the table's
numbers, pure), `journal` (fingerprints and records: what is reused), `candidates` (each method's pass lists
for one function, and compiling them), `pipeline` (the resumable run over functions), `report` (the journal
read back into rows, timings and the markdown table), `plot` (improvement vs samples), `served_mix` (the
service's mixes of a model's and the coreset's candidates, from journals).
"""

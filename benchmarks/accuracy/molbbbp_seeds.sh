#!/usr/bin/env bash
# 4 seeds of ERM and PrunE on ogbg-molbbbp (scaffold), paper Table 1's setting:
# 4-layer GIN with virtual node, hidden 64, eta=0.85, K=50, lambda1=10, lambda2=0.01.
#
# Usage: JOBS=2 bash benchmarks/accuracy/molbbbp_seeds.sh [OUT_ROOT] [VARIANT...]
#   then python -m benchmarks.accuracy.table OUT_ROOT
# Variants: erm; prune (paper loss forms, grprune defaults); prune-official (official
# loss forms, tau=0.2, sampled evaluation as in the official code); prune-sample
# (paper forms, sampled evaluation). JOBS runs in parallel, one torch thread each
# (small molecular graphs gain nothing from intra-op threads). Finished runs are
# skipped and interrupted ones resume, so the script can be re-run at will.
set -euo pipefail
out=${1:-runs/bench-molbbbp}; shift || true
variants=${*:-erm prune}
jobs=${JOBS:-2}
for v in $variants; do
  case $v in
    erm)            args="--reg none" ;;
    prune)          args="--selector gumbel-gin --reg size,eps-align" ;;
    prune-official) args="--selector gumbel-gin --reg size,eps-align -H reg.size.form=official -H reg.eps-align.form=official -H selector.tau=0.2 -H selector.eval_mode=sample" ;;
    prune-sample)   args="--selector gumbel-gin --reg size,eps-align -H selector.eval_mode=sample" ;;
    *) echo "unknown variant $v" >&2; exit 2 ;;
  esac
  for seed in 0 1 2 3; do
    echo "grprune run --data ogbg-molbbbp --split scaffold --seed $seed --progress none --json --out $out/$v/seed$seed $args"
  done
done | OMP_NUM_THREADS=1 xargs -P "$jobs" -I{} sh -c '{} > /dev/null && echo "done: {}"'

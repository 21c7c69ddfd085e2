#!/usr/bin/env bash
# Every registered method once (seed 0) on one dataset, for the zoo table.
#
# Usage: JOBS=2 bash benchmarks/zoo/run.sh DATASET OUT_ROOT [extra grprune flags...]
#   e.g. bash benchmarks/zoo/run.sh ogbg-molbbbp runs/zoo-molbbbp
#        bash benchmarks/zoo/run.sh good-motif runs/zoo-motif --split basis --epochs 10 -H data.limit=3000
#   then python -m benchmarks.zoo.table OUT_ROOT
# Methods (METHODS="..." to pick): erm, prune (size,eps-align), gsat, ciga, irm, vrex,
# groupdro, drop-edge.
# Each with its declared defaults (grprune ls regularizers). JOBS runs in parallel, one
# torch thread each. Finished runs are skipped, interrupted ones resume.
set -euo pipefail
data=$1; out=$2; shift 2
extra="$*"
jobs=${JOBS:-2}
for m in ${METHODS:-erm prune gsat ciga irm vrex groupdro drop-edge}; do
  case $m in
    erm)       args="--reg none" ;;
    prune)     args="--reg size,eps-align" ;;
    drop-edge) args="--selector drop-edge --reg none" ;;
    *)         args="--reg $m" ;;
  esac
  echo "grprune run --data $data --seed 0 --progress none --json --out $out/$m $args $extra"
done | OMP_NUM_THREADS=1 xargs -P "$jobs" -I{} sh -c '{} > /dev/null && echo "done: {}"'

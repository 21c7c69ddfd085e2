#!/usr/bin/env bash
# What this project's GPU sessions ran, on the lent machine (Python 3.12 with CUDA torch;
# dgl/ogb/rdkit wheels carried in .whl/). Usage, from the repository root:
#   bash benchmarks/device.sh start   # install, speed benchmark on CUDA, start the GOOD-Motif sweep
#   bash benchmarks/device.sh wait S  # wait up to S seconds for the sweep, then pack results
# Results land in $OUT (speed-cuda.jsonl, acc-motif.tgz without checkpoints, sweep.out).
set -u
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1 || true
export PYTHONPATH=/tmp/site:$PWD GRPRUNE_DATA_ROOT=/tmp/data PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
pack() {
  tar czf "$OUT/acc-motif.tgz" --exclude=checkpoint.pt --exclude=state.pt \
    --exclude=edge_probs.npz -C /tmp acc-motif 2>/dev/null
  cp /tmp/sweep.out "$OUT/" 2>/dev/null
  grep -c '^sweep: done' /tmp/sweep.out 2>/dev/null
}
case ${1:-start} in
  start)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    for s in basis size; do python3 -m grprune data info good-motif --split $s >/dev/null; done
    python3 -m grprune data info ogbg-molbbbp >/dev/null
    python3 benchmarks/speed/bench.py --device cuda --epochs 3 --out "$OUT/speed-cuda.jsonl"
    setsid nohup python3 -m grprune sweep --spec benchmarks/accuracy/good-motif.yaml \
      --out /tmp/acc-motif --workers 16 --device cuda --progress plain >/tmp/sweep.out 2>&1 &
    budget=${2:-560}
    ;;
  wait) budget=${2:-560} ;;
esac
while [ $(( $(date +%s) - t0 )) -lt "$budget" ]; do
  if [ -f /tmp/sweep.out ] && grep -q '^sweep: .* configurations in' /tmp/sweep.out; then break; fi
  sleep 10
done
echo "runs done: $(pack)"; tail -3 /tmp/sweep.out

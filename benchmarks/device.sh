#!/usr/bin/env bash
# What this project's GPU sessions run on the lent machine (Python 3.12 with CUDA torch;
# dgl/ogb/rdkit wheels carried in .whl/, git-ignored; fetch them on this side with
#   pip download -d .whl --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       --platform manylinux_2_28_x86_64 --no-deps dgl==2.1.0 ogb==1.3.6 outdated littleutils rdkit
# and name .whl in the device call's carry). Usage, from the repository root:
#   bash benchmarks/device.sh start [S]  # install, start the accuracy sweep and the CUDA
#                                        # tests beside it, wait up to S s
#   bash benchmarks/device.sh wait [S]   # wait up to S seconds more for the sweep
#   bash benchmarks/device.sh bench      # CUDA speed benchmark (after the sweep: timings
#                                        # taken beside 16 training runs would be meaningless)
#   bash benchmarks/device.sh speed [S]  # issues 43 and 49 in one call of at most S s
#                                        # (default 450): benchmarks/speed/targets.py, the
#                                        # fast path on and off, deterministic on and off,
#                                        # profiles, the padding A/B, the train.compile A/B
#                                        # (compile.py; GRPRUNE_COMPILE_BUDGET s, default
#                                        # 150, 0 = none), op counts, the device
#                                        # tests, then the drift of one seed
#                                        # (GRPRUNE_DEVICE=cpu: the same on a CPU, --quick)
#   bash benchmarks/device.sh official-motif [S]       # issue 51: the official PrunE code
#       # (benchmarks/accuracy/official) on grprune's GOOD-Motif, basis and size x seeds 0-3,
#       # 8 runs side by side on the one GPU (MPS), detached; waits up to S s (default 540).
#       # Needs build/official (benchmarks/accuracy/official/stage.sh, ~34 MiB: the patched
#       # checkout, the export, the wheels of its stack): carry build/official, not .whl
#   bash benchmarks/device.sh official-motif-wait [S]  # the same runs, up to S s more
#       # Both write official-motif.jsonl (runs.py's records of the finished runs, for
#       # official/results.jsonl), official-motif-logs.tgz (every run's log: per-epoch
#       # accuracies), official-motif.out and official-checkpoints/ to $OUT. Every run
#       # saves a checkpoint at the end of each epoch (runs.py, official/checkpoint.py);
#       # official-checkpoints/<dataset>-<split>-seed<seed>.pt are those of the runs not done
#       # when the mode packs (a GOOD-Motif one is 5.2 MiB in pre-training, 6.8 MiB after:
#       # 8 about 54 MiB; the pack says their total). To go on in a later session: append
#       # official-motif.jsonl to official/results.jsonl, copy the checkpoints into
#       # build/official/checkpoints/ (mkdir -p build/official/checkpoints && cp
#       # <files_at>/official-checkpoints/*.pt build/official/checkpoints/), and call the
#       # mode again carrying build/official: a (split, seed) in official/results.jsonl is
#       # not started, the others resume at the epoch after their checkpoint. Epochs run
#       # after the last pack are lost: end a session with official-motif-wait, which packs
#       # again. OFFICIAL_MOTIF_SEEDS (0-3),
#       # OFFICIAL_MOTIF_SPLITS ("basis size"), OFFICIAL_MOTIF_EXTRA (more run.py arguments,
#       # e.g. "--epochs 2": a smoke test, not recorded), OFFICIAL_PYTHON and
#       # OFFICIAL_NO_WHEELS=1 let the mode be tried on a CPU with the official venv
# GRPRUNE_SPEC names the sweep: a name under benchmarks/accuracy (default good-motif:
# benchmarks/accuracy/good-motif.yaml; good-hiv is the other one that needs a GPU) or the path
# of a spec file (e.g. benchmarks/accuracy/prune/motif-paper/motif-paper-gpu.yaml). Results land in $OUT:
# acc-<spec name>.tgz (run folders without checkpoints; edge_probs.npz kept), sweep.out,
# speed-cuda.jsonl; speed: cuda-targets.jsonl (padding A/B rows labelled pad-false/pad-true),
# profile-*.txt, targets-runs*.tgz, opcount-cuda.jsonl, drift.jsonl, speed.log, cuda-tests*.txt
# (benchmarks/speed/README.md, "Prepared for the next GPU session" and "Ops per step").
# Each call must follow the last within the machine's 30 s idle release.
#
# The 16 sweep workers share one GPU. Without help the GPU time-slices between their CUDA
# contexts, so small-batch GNN steps from different processes never overlap; with
# GRPRUNE_MPS=1 (the default) the script starts NVIDIA's Multi-Process Service daemon, which
# lets their kernels run side by side, and falls back to plain sharing if the daemon or a
# first CUDA call through it fails. MPS changes no setting of the card (no compute mode,
# clocks or persistence) and ends with the machine.
set -u
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1 || true
export PYTHONPATH=/tmp/site:$PWD GRPRUNE_DATA_ROOT=${GRPRUNE_DATA_ROOT:-/tmp/data} \
  PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
PY=${GRPRUNE_PYTHON:-python3}  # speed: the interpreter (a venv's on a CPU try)
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
WORKERS=${GRPRUNE_WORKERS:-16}
DEVICE=${GRPRUNE_DEVICE:-cuda}  # cpu: try the script on a machine without a GPU
SPEC=${GRPRUNE_SPEC:-good-motif}
case $SPEC in
  *.yaml|*.yml) SPEC_FILE=$SPEC; NAME=$(basename "${SPEC%.*}") ;;
  *) SPEC_FILE=benchmarks/accuracy/$SPEC.yaml; NAME=$SPEC ;;
esac
ROOT=acc-$NAME
pack() {
  tar czf "$OUT/$ROOT.tgz" --exclude=checkpoint.pt --exclude=state.pt \
    -C /tmp "$ROOT" 2>/dev/null
  cp /tmp/sweep.out "$OUT/" 2>/dev/null
  grep -c '^sweep: done' /tmp/sweep.out 2>/dev/null
}
start_mps() {
  command -v nvidia-cuda-mps-control >/dev/null || { echo "mps: no daemon binary"; return; }
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d && timeout 90 python3 -c \
      "import torch; assert float(torch.ones(4, device='cuda').sum()) == 4.0"; then
    echo "mps: on"
  else
    echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 2; echo "mps: off (failed)"
  fi
}
# speed: install (above), GOOD-Motif generated on the CPU while the fast path's device tests
# run, then the timings alone on the machine (with the padding A/B and the train.compile A/B,
# compile.py, where the tree has the switches), the op counts, the other device tests, and with the time left the drift of one seed
# without deterministic kernels (issue 49, item 6).
speed() {
  local budget=${1:-450} left k quick="" steps=8 pad="" main
  export GRPRUNE_TEST_DATA_ROOT=$GRPRUNE_DATA_ROOT  # the device tests read the data prepared here
  # tests/test_device.py takes the device as a parameter: the cuda ones here (CI runs the cpu
  # ones); a CPU try runs the cpu ones, the plan --quick and fewer counted steps
  if [ "${DEVICE%%:*}" = cpu ]; then k="not cuda"; quick=--quick; steps=4; else k=cuda; fi
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
    2>/dev/null || echo "no nvidia-smi"
  echo quit | nvidia-cuda-mps-control 2>/dev/null  # one process on the GPU at a time
  $PY -c "import torch, grprune.compat; print('torch', torch.__version__, 'cuda', \
torch.cuda.is_available(), 'dgl', grprune.compat.dgl.__version__, 'cpus', torch.get_num_threads())" \
    || exit 1
  $PY -m grprune data info ogbg-molbbbp >/dev/null || exit 1
  $PY -m grprune data info good-motif --split basis >/tmp/motif-data.out 2>&1 &
  local motif=$!
  # the padding switch (issue 49, item 2): an A/B only where this tree knows both settings
  local pad_on=${GRPRUNE_PAD_ON:-train.pad_buckets=true}
  local pad_off=${GRPRUNE_PAD_OFF:-train.pad_buckets=false}
  if $PY -c "import sys; from grprune.resolve import resolve_config
for o in sys.argv[1:]: resolve_config(overrides=[o])" "$pad_on" "$pad_off" >/dev/null 2>&1; then
    pad=1; echo "padding: A/B with $pad_off and $pad_on"
  else
    echo "padding: $pad_on or $pad_off unknown to this tree: no padding A/B"
  fi
  # the compiled step (issue 49, item 3): GRPRUNE_COMPILE_BUDGET seconds (default 150) kept
  # for compile.py where this tree knows train.compile (0: no compile A/B)
  local comp=0
  if [ "${GRPRUNE_COMPILE_BUDGET:-150}" -gt 0 ] && $PY -c "from grprune.resolve import \
resolve_config; resolve_config(overrides=['train.compile=default'])" >/dev/null 2>&1; then
    comp=${GRPRUNE_COMPILE_BUDGET:-150}; echo "compile: A/B of train.compile in ${comp} s"
  else
    echo "compile: train.compile unknown to this tree or no budget: no compile A/B"
  fi
  if [ "${GRPRUNE_CUDA_TESTS:-1}" = 1 ]; then
    # the fast path's and the captured step's tests first (train.compile=cuda-graph: whether
    # CUDA captures PrunE's step at all), while GOOD-Motif is generated
    timeout 150 $PY -m pytest -q -p no:cacheprovider -k "(fast_path or captured_steps or captured_evaluation) and ($k)" \
      tests/test_device.py >"$OUT/cuda-tests-fast.txt" 2>&1
    echo "pytest rc $?" >>"$OUT/cuda-tests-fast.txt"; tail -2 "$OUT/cuda-tests-fast.txt"
  fi
  wait $motif || { tail -5 /tmp/motif-data.out; exit 1; }
  echo "data ready, fast-path tests done after $(( $(date +%s) - t0 )) s"
  # GRPRUNE_TESTS_RESERVE: seconds kept for the op counts and the other device tests
  left=$(( budget - ($(date +%s) - t0) - ${GRPRUNE_TESTS_RESERVE:-120} - comp ))
  main=$(( pad ? left * 2 / 3 : left ))
  # shellcheck disable=SC2086  # GRPRUNE_TARGETS_ARGS: more flags, e.g. --only motif
  $PY -m benchmarks.speed.targets --device "$DEVICE" --out "$OUT" --budget "$main" $quick \
    ${GRPRUNE_TARGETS_ARGS:-}
  echo "targets done after $(( $(date +%s) - t0 )) s"
  if [ -n "$pad" ]; then
    for setting in "$pad_off" "$pad_on"; do
      left=$(( (budget - ($(date +%s) - t0) - ${GRPRUNE_TESTS_RESERVE:-120} - comp) / 2 ))
      [ "$setting" = "$pad_on" ] && left=$(( left * 2 ))
      [ "$left" -gt 20 ] || { echo "padding: no time left for $setting"; break; }
      # shellcheck disable=SC2086
      $PY -m benchmarks.speed.targets --device "$DEVICE" --out "$OUT" --budget "$left" $quick \
        --only molbbbp-prune-run-100:fast,motif-prune-epoch:fast -H "$setting" \
        --label "pad-${setting##*=}"
    done
    echo "padding A/B done after $(( $(date +%s) - t0 )) s"
  fi
  if [ "$comp" -gt 0 ]; then
    # cuda-graph, none, reduce-overhead in one process (compile.jsonl); a run starts
    # only within the budget, and one that overruns it is cut 45 s after (a CPU try overran
    # by 120 s with reduce-overhead and left no time for the device tests)
    # shellcheck disable=SC2086  # GRPRUNE_COMPILE_ARGS: more flags, e.g. --only motif
    timeout $(( comp + 45 )) $PY -m benchmarks.speed.compile --device "$DEVICE" --out "$OUT" \
      --budget "$comp" $quick ${GRPRUNE_COMPILE_ARGS:-} 2>&1 | grep -v '^USDT'
    echo "compile A/B done after $(( $(date +%s) - t0 )) s"
  fi
  # ATen ops per training step (the launches' proxy; on CUDA the profiler's launches too)
  timeout 120 $PY -m benchmarks.speed.opcount --device "$DEVICE" --steps "$steps" \
    --out "$OUT/opcount-${DEVICE%%:*}.jsonl" 2>&1 | grep -v '^USDT'
  if [ -n "$pad" ]; then
    for setting in "$pad_off" "$pad_on"; do
      timeout 60 $PY -m benchmarks.speed.opcount --device "$DEVICE" --steps "$steps" \
        --only molbbbp-prune,motif-prune -H "$setting" --label "pad-${setting##*=}" \
        --out "$OUT/opcount-${DEVICE%%:*}.jsonl" 2>&1 | grep -v '^USDT'
    done
  fi
  echo "op counts done after $(( $(date +%s) - t0 )) s"
  left=$(( budget - ($(date +%s) - t0) ))
  if [ "${GRPRUNE_CUDA_TESTS:-1}" = 1 ] && [ "$left" -gt 20 ]; then
    timeout "$left" $PY -m pytest -q -p no:cacheprovider -k "not fast_path and not captured_steps and not captured_evaluation and ($k)" \
      tests/test_device.py >"$OUT/cuda-tests.txt" 2>&1
    echo "pytest rc $? (limit ${left} s)" >>"$OUT/cuda-tests.txt"; tail -2 "$OUT/cuda-tests.txt"
  fi
  # with the time left: two runs of one seed, deterministic kernels off (drift.jsonl)
  left=$(( budget - ($(date +%s) - t0) - 5 ))
  if [ "$left" -ge "${GRPRUNE_DRIFT_MIN:-60}" ]; then
    $PY -m benchmarks.speed.drift --device "$DEVICE" --budget "$left" $quick \
      --out "$OUT/drift.jsonl"
  else
    echo "drift: ${left} s left, under ${GRPRUNE_DRIFT_MIN:-60} s: not run"
  fi
  echo "speed done after $(( $(date +%s) - t0 )) s"
}
# official-motif: the official code's 8 GOOD-Motif runs as runs.py processes, one results file
# each (runs.py rewrites its file to append: one writer per file), then pack what is done.
OM=/tmp/official-motif
official_motif_pack() {
  cat "$OM"/results-*.jsonl >"$OUT/official-motif.jsonl" 2>/dev/null
  tar czf "$OUT/official-motif-logs.tgz" -C "$OM" work/logs 2>/dev/null
  cp "$OM/official-motif.out" "$OUT/" 2>/dev/null
  # the unfinished runs' checkpoints (written by os.replace: a copy is never half a file)
  rm -rf "$OUT/official-checkpoints"
  mkdir -p "$OUT/official-checkpoints"
  cp "$OM"/work/checkpoints/*.pt "$OUT/official-checkpoints/" 2>/dev/null
  if ls "$OUT"/official-checkpoints/*.pt >/dev/null 2>&1; then
    echo "official-motif: checkpoints in \$OUT/official-checkpoints:" \
      "$(cd "$OUT/official-checkpoints" && ls -- *.pt | tr '\n' ' ')" \
      "($(du -sm "$OUT/official-checkpoints" | cut -f1) MiB)"
  else
    echo "official-motif: no checkpoint to pack (no run has finished an epoch, or all are done)"
  fi
  echo "official-motif: $(cat "$OM"/results-*.jsonl 2>/dev/null | wc -l) of" \
    "$(ls "$OM"/pid-* 2>/dev/null | wc -l) runs recorded after $(( $(date +%s) - t0 )) s"
  grep -h "test .* at epoch\|failed\|Error" "$OM"/run-*.out 2>/dev/null | tail -16
  for f in "$OM"/work/logs/*.log; do
    [ -f "$f" ] && echo "$(basename "$f"): $(grep -c 'Current Epoch' "$f") epochs started"
  done
}
official_motif_wait() {
  local budget=$1 pid running
  while [ $(( $(date +%s) - t0 )) -lt "$budget" ]; do
    running=0
    for pid in $(cat "$OM"/pid-* 2>/dev/null); do kill -0 "$pid" 2>/dev/null && running=1; done
    [ "$running" = 0 ] && break
    sleep 15
  done
  official_motif_pack
}
official_motif() {
  local budget=$1 stage=${OFFICIAL_STAGE:-build/official} py=${OFFICIAL_PYTHON:-python3}
  local split seed
  [ -d "$stage/src" ] && [ -d "$stage/data" ] \
    || { echo "official-motif: no $stage; run benchmarks/accuracy/official/stage.sh and carry it"; exit 2; }
  mkdir -p "$OM/work"
  if [ -z "${OFFICIAL_NO_WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$OM/site" "$stage"/wheels/*.whl >/dev/null 2>&1 || echo "official-motif: wheels failed"
    export PYTHONPATH=$OM/site:${PYTHONPATH:-}
  fi
  # shellcheck disable=SC1091
  [ -f "$stage/commits.env" ] && . "$stage/commits.env" && export GRPRUNE_COMMIT
  "$py" -c "import torch, torch_geometric, torchmetrics, ogb, termcolor, matplotlib; print('official stack: torch', \
torch.__version__, 'cuda', torch.cuda.is_available(), 'pyg', torch_geometric.__version__)" || exit 1
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  export OFFICIAL_HARDWARE=${OFFICIAL_HARDWARE:-"1 ${gpu:-unknown GPU} (CUDA), shared by 8 runs"}
  [ -n "$gpu" ] && [ "${GRPRUNE_MPS:-1}" = 1 ] && start_mps
  export OFFICIAL_SRC=$PWD/$stage/src OFFICIAL_DATA=$PWD/$stage/data OFFICIAL_WORK=$OM/work
  # an earlier session's checkpoints, carried in build/official/checkpoints: runs.py resumes
  mkdir -p "$OM/work/checkpoints"
  cp "$stage"/checkpoints/*.pt "$OM/work/checkpoints/" 2>/dev/null \
    && echo "official-motif: carried checkpoints: $(cd "$OM/work/checkpoints" && ls -- *.pt | tr '\n' ' ')"
  for split in ${OFFICIAL_MOTIF_SPLITS:-basis size}; do
    for seed in $("$py" -c "from benchmarks.accuracy.official import runs
print(*runs.parse_seeds('${OFFICIAL_MOTIF_SEEDS:-0-3}'))"); do
      # recorded by an earlier session (official/results.jsonl): not run again
      if [ -z "${OFFICIAL_MOTIF_EXTRA:-}" ] && "$py" -c "import sys
from benchmarks.accuracy.official import common
done = {(r['dataset'], r['split'], r['seed']) for r in common.read_results(common.RESULTS)}
sys.exit(0 if ('good-motif', '$split', $seed) in done else 1)"; then
        echo "official-motif: good-motif $split seed $seed is in results.jsonl: not started"
        continue
      fi
      setsid nohup "$py" -m benchmarks.accuracy.official.runs --dataset good-motif \
        --split "$split" --seeds "$seed" --results "$OM/results-$split-$seed.jsonl" \
        ${OFFICIAL_MOTIF_EXTRA:+--extra "$OFFICIAL_MOTIF_EXTRA"} \
        >"$OM/run-$split-$seed.out" 2>&1 &
      echo $! >"$OM/pid-$split-$seed"
    done
  done
  echo "official-motif: $(ls "$OM"/pid-* 2>/dev/null | wc -l) runs started after $(( $(date +%s) - t0 )) s" \
    | tee "$OM/official-motif.out"
  official_motif_wait "$budget"
}
case ${1:-start} in
  official-motif)
    official_motif "${2:-540}" 2>&1 | tee -a "$OUT/official-motif-call.txt"
    exit "${PIPESTATUS[0]}"
    ;;
  official-motif-wait)
    official_motif_wait "${2:-540}"
    exit 0
    ;;
  start)
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader
    echo "cpus: $(nproc)"
    python3 -c "import torch, ogb, grprune.compat; print('torch', torch.__version__, \
'cuda', torch.cuda.is_available(), 'dgl', grprune.compat.dgl.__version__)" || exit 1
    [ "${GRPRUNE_MPS:-1}" = 1 ] && start_mps
    case $NAME in
      *motif*) data=good-motif; splits="basis size" ;;
      *hiv*) data=good-hiv; splits="scaffold size" ;;
      *) data=""; splits="" ;;
    esac
    for s in $splits; do python3 -m grprune data info "$data" --split "$s" >/dev/null & done
    wait
    echo "data ready after $(( $(date +%s) - t0 )) s"
    setsid nohup python3 -m grprune sweep --spec "$SPEC_FILE" \
      --out "/tmp/$ROOT" --workers "$WORKERS" --device "$DEVICE" --progress plain \
      >/tmp/sweep.out 2>&1 &
    # the CUDA tests (tests/test_device.py's cuda parameters; CI runs the cpu ones), beside the
    # sweep: GRPRUNE_CUDA_TESTS=0 skips
    [ "${GRPRUNE_CUDA_TESTS:-1}" = 1 ] && (timeout 420 python3 -m pytest -q -p no:cacheprovider \
      -k cuda tests/test_device.py >"$OUT/cuda-tests.txt" 2>&1
      echo "pytest rc $?" >>"$OUT/cuda-tests.txt") &
    TESTS=$!
    ;;
  wait) ;;
  speed)
    speed "${2:-450}" 2>&1 | tee "$OUT/speed.log"
    exit "${PIPESTATUS[0]}"
    ;;
  bench)
    echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 2
    python3 -m grprune data info ogbg-molbbbp >/dev/null
    python3 -m benchmarks.speed.bench --device cuda --epochs 3 --out "$OUT/speed-cuda.jsonl"
    echo "bench done after $(( $(date +%s) - t0 )) s"
    exit 0
    ;;
esac
budget=${2:-560}
while [ $(( $(date +%s) - t0 )) -lt "$budget" ]; do
  if grep -q '^sweep: .* configurations in' /tmp/sweep.out 2>/dev/null \
      && { [ -z "${TESTS:-}" ] || ! kill -0 "$TESTS" 2>/dev/null; }; then break; fi
  sleep 15
done
echo "runs done: $(pack) after $(( $(date +%s) - t0 )) s"
grep -E '^sweep: (done|failed)' /tmp/sweep.out 2>/dev/null | tail -4; tail -2 /tmp/sweep.out 2>/dev/null || true

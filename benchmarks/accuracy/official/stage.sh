#!/usr/bin/env bash
# Stage what a lent GPU needs for `bash benchmarks/device.sh official-motif` in build/official/
# (git-ignored; name it in the device call's carry, about 30 MiB):
#   build/official/src/    the patched official checkout ($OFFICIAL_SRC), without .git
#   build/official/data/   grprune's GOOD-Motif export (good_motif_basis, good_motif_size)
#   build/official/commits.env  GRPRUNE_COMMIT (grprune's HEAD) for runs.py's records
#   build/official/wheels/ the official code's pure-Python stack and matplotlib for the
#                          device's Python (3.12, manylinux x86_64), --no-deps, pinned to the
#                          versions of /work/official-venv; the device has CUDA torch, numpy,
#                          scipy, pandas, scikit-learn, networkx, tqdm and requests already
# Usage, from the repository root, after patch.py and export.py --dataset good-motif:
#   bash benchmarks/accuracy/official/stage.sh            # OFFICIAL_SRC, OFFICIAL_DATA as README
#   STAGE_NO_WHEELS=1 bash benchmarks/accuracy/official/stage.sh   # src and data only (offline)
set -euo pipefail
src=${OFFICIAL_SRC:-/work/official-src}
data=${OFFICIAL_DATA:-/work/official-data}
out=${STAGE_OUT:-build/official}
pip=${PIP:-.venv/bin/python -m pip}
grep -q "grprune-harness" "$src/run.py" 2>/dev/null \
  || { echo "stage.sh: $src is not a patched checkout; run patch.py first" >&2; exit 2; }
for s in basis size; do
  [ -f "$data/good_motif_$s/grprune.json" ] \
    || { echo "stage.sh: no $data/good_motif_$s; run export.py --dataset good-motif" >&2; exit 2; }
done
mkdir -p "$out/wheels"
rm -rf "$out/src.tmp" "$out/data.tmp"
mkdir -p "$out/src.tmp" "$out/data.tmp"
(cd "$src" && tar cf - --exclude=.git --exclude=__pycache__ .) | tar xf - -C "$out/src.tmp"
cp -r "$data/good_motif_basis" "$data/good_motif_size" "$out/data.tmp/"
rm -rf "$out/src" "$out/data"
mv "$out/src.tmp" "$out/src"
mv "$out/data.tmp" "$out/data"
# the commits runs.py cannot read on the device (no .git there)
printf 'GRPRUNE_COMMIT=%s\n' "$(git rev-parse --short HEAD 2>/dev/null)" >"$out/commits.env"
if [ -z "${STAGE_NO_WHEELS:-}" ]; then
  # shellcheck disable=SC2086  # $pip is a command line
  $pip download -q --disable-pip-version-check -d "$out/wheels" --only-binary=:all: --no-deps \
    --python-version 3.12 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 \
    torch_geometric==2.8.1 torchmetrics==1.9.0 lightning-utilities==0.15.3 termcolor==3.3.0 \
    ogb==1.3.6 outdated==0.2.2 littleutils==0.2.4 matplotlib==3.11.2 contourpy==1.3.3 \
    cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1 pillow==13.0.0 pyparsing==3.3.3 \
    python-dateutil==4.0.0 six==1.17.0 xxhash==4.1.0 fsspec==2026.9.0 jinja2==3.1.6 \
    markupsafe==3.0.4 narwhals==2.29.0 psutil==7.2.2 packaging==26.4
fi
echo "staged $(du -sh "$out" | cut -f1) in $out: $(ls "$out/wheels" | wc -l) wheels"

#!/usr/bin/env bash
# Issue #8 single-GPU checks on a machine with (at least) one NVIDIA GPU, in under 5 minutes:
# kernel calibration on CUDA (CUDA events, warm-up, CUDA-graph replay) against the H200 roofline,
# decode with compute=measured, topology discovery, and the replay runner (gloo; NCCL if >= 4 GPUs).
# All figures go to ONE file, $OUT/gpu_check.json (and gpu_check.md, the same as tables);
# OUT defaults to ./gpu_check.
#
#   OUT=/tmp/gpu benchmarks/gpu_check.sh
#
# Environment: the first Python among .venv/bin/python, python3 that has a CUDA torch and the
# project's dependencies is used. Otherwise the project venv is created (python3 dev.py install)
# and, since pyproject's torch==2.13.0 resolves to the CPU build on CPU hosts, the same version is
# reinstalled from the default index (PyPI's Linux wheels are CUDA builds) -- needs network access.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check}"
mkdir -p "$OUT"
export GX_TRACKING=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

ok() {  # python has CUDA torch and the project's dependencies
  "$1" - <<'PY' 2>/dev/null
import sys
import torch, hydra, omegaconf, sympy, numpy, scipy, networkx, yaml  # noqa: F401
sys.exit(0 if torch.cuda.is_available() else 1)
PY
}

PY=""
for cand in .venv/bin/python python3; do
  if command -v "$cand" >/dev/null 2>&1 && ok "$cand"; then PY="$cand"; break; fi
done
if [ -z "$PY" ]; then
  echo "[gpu_check] no Python with CUDA torch + deps; setting up .venv" >&2
  python3 dev.py install || echo "[gpu_check] dev.py install failed (offline?)" >&2
  if [ -x .venv/bin/python ] && ! ok .venv/bin/python; then
    # replace the CPU wheel by the CUDA one of the same version, then fill in its CUDA runtime deps
    { .venv/bin/python -m pip install --quiet --timeout 20 --retries 1 --force-reinstall --no-deps "torch==2.13.0" \
        --index-url https://pypi.org/simple &&
      .venv/bin/python -m pip install --quiet --timeout 20 --retries 1 "torch==2.13.0" --index-url https://pypi.org/simple; } \
      || echo "[gpu_check] could not install CUDA torch" >&2
  fi
  if [ -x .venv/bin/python ] && ok .venv/bin/python; then PY=.venv/bin/python; fi
fi
if [ -z "$PY" ]; then
  printf '{"error": "no Python with a CUDA build of torch and the project dependencies; see README.md"}\n' > "$OUT/gpu_check.json"
  echo "[gpu_check] no usable CUDA Python; wrote $OUT/gpu_check.json" >&2
  exit 1
fi
echo "[gpu_check] using $PY ($("$PY" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'))" >&2
exec timeout 290 "$PY" benchmarks/gpu_check.py --out "$OUT" --budget-s 270

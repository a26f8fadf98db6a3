#!/usr/bin/env bash
# Create benchmarks/.venv-tf123: an isolated venv holding torchfits 1.2.3 from PyPI,
# the "incumbent" that benchmarks/run_images.py compares against.  It needs its own
# venv because it imports as `torchfits`, exactly like the library in this repo.
#
# Usage: bash benchmarks/setup_incumbent.sh [PYTHON]   (default: python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-tf123"
python="${1:-python3}"

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -I - <<'PY' 2>/dev/null
import importlib.metadata as md
assert md.version("torchfits") == "1.2.3"
PY
then
    echo "incumbent venv already present: $venv"
    exit 0
fi

"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# torch FIRST and pinned: an unpinned resolve of torchfits' `torch` requirement would
# pull a multi-GB CUDA build.  Prefer the CPU wheel lying on this machine; elsewhere set
# TORCH_INDEX_URL to a CPU-only torch index.
local_wheel="$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -n1 || true)"
if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    "${pip[@]}" install "torch==2.13.0" --index-url "$TORCH_INDEX_URL"
elif [[ -n "$local_wheel" ]]; then
    "${pip[@]}" install "$local_wheel"
else
    "${pip[@]}" install "torch==2.13.0"
fi

# With torch already satisfied, this only adds torchfits, numpy and pyarrow.
"${pip[@]}" install "torchfits==1.2.3" numpy

# -I: keep the current directory (maybe the repo root, with its own torchfits) off sys.path.
"$venv/bin/python" -I -c "import torch, torchfits; print('torch', torch.__version__, '| torchfits', torchfits.__version__)"

# Sourced by demo.sh and test.sh: a virtual environment in .venv with the dev dependencies.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade "pip>=25.1"
# Linux without an NVIDIA GPU: PyPI's torch is the CUDA build (about 6 GB); PyTorch's CPU index has a 200 MB one.
CPU_INDEX=https://download.pytorch.org/whl/cpu
if [ "$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null && ! .venv/bin/python -c "import torch" 2>/dev/null; then
    if .venv/bin/python -c "import urllib.request as u; u.urlopen('$CPU_INDEX/torch/', timeout=10)" 2>/dev/null; then
        .venv/bin/python -m pip install --quiet torch torchvision --index-url "$CPU_INDEX"
    else
        echo "note: $CPU_INDEX is unreachable; torch comes from the default index (on Linux, its CUDA build)"
    fi
fi
.venv/bin/python -m pip install --quiet --group dev
.venv/bin/python -c "import torch; print('torch', torch.__version__, 'with CUDA', torch.version.cuda) if torch.version.cuda else print('torch', torch.__version__, '(CPU build)')"
export OMP_NUM_THREADS=1

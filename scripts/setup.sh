# Sourced by demo.sh and test.sh: a virtual environment in .venv with the dev dependencies.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade "pip>=25.1"
.venv/bin/python -m pip install --quiet --group dev
export OMP_NUM_THREADS=1

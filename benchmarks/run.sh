#!/usr/bin/env bash
# The benchmark: its own environment (Lightning and Ignite installed from PyPI), then every contender on the
# same model, data, batch size and optimizer. Not part of CI's pass/fail. Extra arguments go to bench.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x benchmarks/.venv/bin/python ]; then
    python3 -m venv benchmarks/.venv
    benchmarks/.venv/bin/python -m pip install --quiet --upgrade "pip>=25.1"
fi
benchmarks/.venv/bin/python -m pip install --quiet -r benchmarks/requirements.txt
OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" benchmarks/.venv/bin/python benchmarks/bench.py "$@"

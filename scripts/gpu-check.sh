#!/usr/bin/env bash
# One command for a machine with a CUDA GPU: the template's GPU lane (every smoke-trained combination on CUDA),
# the generated all-on repo's own suite, and a set of direct CUDA runs of its command line, then one summary.
#
#   bash scripts/gpu-check.sh          # uses .venv when scripts/setup.sh made one, else the system python3
#
# Logs go to $OUT (or build/gpu-check) so that a remote run brings them back.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS="${OUT:-build/gpu-check}"
mkdir -p "$LOGS" && LOGS=$(cd "$LOGS" && pwd)
PY=python3
[ -x .venv/bin/python ] && PY=$PWD/.venv/bin/python
# An offline GPU machine without the test dependencies: wheels carried in .whl/ (see the device notes).
if ! $PY -c "import cookiecutter, pytest_cookies, torchinfo" 2>/dev/null && [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-site .whl/*.whl
    export PYTHONPATH=/tmp/gpu-site:${PYTHONPATH:-}
fi
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
started=$(date +%s)
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" | tee "$LOGS/env.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOGS/env.txt" 2>&1

# 1. The template's GPU lane.
workers=$(( $(nproc) > 8 ? 8 : $(nproc) ))
timeout "${LANE_TIMEOUT:-240}" $PY -m pytest tests/test_matrix.py tests/test_distributed.py -m gpu -n "$workers" \
    -p no:cacheprovider -q --timeout 200 -o addopts="" >"$LOGS/lane.log" 2>&1
lane_rc=$?

# 2. The all-on render: its own suite and direct CUDA runs.
RENDERS=build/gpu-renders
rm -rf "$RENDERS" && mkdir -p "$RENDERS"
on="use_amp=True use_distributed=True use_sync_bn=True use_freezing=True use_layerwise_lr=True use_mixup=True"
on="$on use_label_smoothing=True use_grad_clipping=True use_checkpointing=True use_tensorboard=True use_ema=True"
$PY -c "import sys; sys.path.insert(0, '.'); from cookiecutter.cli import main; main()" . --no-input -o "$RENDERS" \
    $on amp_precision=fp16 gpu_ids=0 >"$LOGS/render.log" 2>&1
cd "$RENDERS/my-project" || exit 1
export PYTHONPATH=$PWD/src:${PYTHONPATH:-}
timeout "${SUITE_TIMEOUT:-150}" $PY -m pytest -q -n "$workers" -p no:cacheprovider -x --timeout 120 \
    >"$LOGS/generated-suite.log" 2>&1
suite_rc=$?
common=(train --device cuda --epochs 2 --max-steps-per-epoch 4 --batch-size 16 --no-plots --num-workers 2)
tricks=(--freeze features.0 --lr-mult fc=10 --mixup-alpha 0.4 --cutmix-alpha 1.0 --ema-decay 0.9 --clip-grad-norm 0.5)
declare -a names codes
: >"$LOGS/direct.log"
direct() {  # name, command...
    local name=$1; shift
    timeout 90 "$@" >"$LOGS/cmd-$name.log" 2>&1
    local rc=$?
    names+=("$name"); codes+=("$rc")
    echo "--- $name: exit $rc" >>"$LOGS/direct.log"; tail -n 25 "$LOGS/cmd-$name.log" >>"$LOGS/direct.log"
}
direct fp16 $PY -m my_project "${common[@]}" "${tricks[@]}" --precision fp16 --output-dir runs/fp16
direct fp16-resume $PY -m my_project "${common[@]}" "${tricks[@]}" --precision fp16 --output-dir runs/fp16 \
    --resume auto --epochs 3
direct bf16-cl-det $PY -m my_project "${common[@]}" "${tricks[@]}" --precision bf16 --channels-last --deterministic \
    --output-dir runs/bf16
direct compile $PY -m my_project "${common[@]}" --compile --output-dir runs/compile
direct resnet18-profile $PY -m my_project "${common[@]}" --model resnet18 --profile --output-dir runs/resnet18
direct torchrun1 $PY -m torch.distributed.run --standalone --nproc-per-node 1 -m my_project "${common[@]}" \
    "${tricks[@]}" --output-dir runs/torchrun1
direct nproc2-one-gpu $PY -m my_project "${common[@]}" --nproc 2 --output-dir runs/nproc2
direct gpus-empty $PY -m my_project "${common[@]}" --gpus "" --output-dir runs/nogpu
direct evaluate $PY -m my_project evaluate --weights runs/fp16/model.pt --device cuda
direct evaluate-cpu $PY -m my_project evaluate --weights runs/fp16/model.pt --device cpu --output-dir runs/evalcpu
cd - >/dev/null

echo "=== gpu-check summary ($(($(date +%s) - started)) s)"
cat "$LOGS/env.txt"
echo "lane (pytest -m gpu): exit $lane_rc; $(grep -E 'combination matrix|passed|failed|skipped' "$LOGS/lane.log" | tail -n 2 | tr '\n' ' ')"
echo "generated suite: exit $suite_rc; $(tail -n 1 "$LOGS/generated-suite.log")"
for i in "${!names[@]}"; do echo "direct ${names[$i]}: exit ${codes[$i]}"; done

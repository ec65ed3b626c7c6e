#!/usr/bin/env bash
# One command for a machine with a CUDA GPU, meant to finish within 8 minutes on one recent GPU: the template's GPU
# lane (every accepted combination smoke-trained on CUDA), the generated all-on repo's own suite, direct CUDA runs
# of its command line, and the benchmark's CUDA path in a short mode (bare loop against the generated one), then
# one summary: combinations run, failures, images/s, wall time.
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
workers=$(( $(nproc) > 12 ? 12 : $(nproc) ))  # each case is mostly CPU work around a short CUDA run
timeout "${LANE_TIMEOUT:-300}" $PY -m pytest tests/test_matrix.py tests/test_distributed.py -m gpu -n "$workers" \
    -p no:cacheprovider -q -rf --timeout 200 -o addopts="" >"$LOGS/lane.log" 2>&1
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
timeout "${SUITE_TIMEOUT:-120}" $PY -m pytest -q -n "$workers" -p no:cacheprovider -rf --timeout 100 \
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

# 3. The benchmark's CUDA path, short: images/s of the bare PyTorch loop and of the generated one.
declare -a rates
for model in small_cnn resnet18; do
    for loop in bare generated; do
        rate=$(timeout 120 $PY benchmarks/bench.py --one "$loop" "$model" --src "$RENDERS/my-project/src" \
            --images 16384 --epochs 2 2>>"$LOGS/bench.log" | tee -a "$LOGS/bench.log" |
            $PY -c "import json, sys; print(round(json.load(sys.stdin)['images_per_second']))" 2>/dev/null)
        rates+=("$model $loop ${rate:-failed}")
    done
done

lane_cases=$(grep -Eo '[0-9]+ (passed|failed)' "$LOGS/lane.log" | awk '{n += $1} END {print n + 0}')
lane_failed=$(grep -Eo '[0-9]+ failed' "$LOGS/lane.log" | awk '{n += $1} END {print n + 0}')
direct_failed=0
for i in "${!names[@]}"; do
    expected=0
    case ${names[$i]} in nproc2-one-gpu | gpus-empty) expected=6 ;; esac  # refused with one line, exit 6
    [ "${codes[$i]}" = "$expected" ] || direct_failed=$((direct_failed + 1))
done
echo "=== gpu-check summary"
cat "$LOGS/env.txt"
echo "lane (pytest -m gpu): exit $lane_rc; $(grep 'combination matrix' "$LOGS/lane.log" | tail -n 1)"
echo "lane: $lane_cases cases run, $lane_failed failed; $(tail -n 1 "$LOGS/lane.log")"
echo "generated suite: exit $suite_rc; $(tail -n 1 "$LOGS/generated-suite.log")"
for i in "${!names[@]}"; do echo "direct ${names[$i]}: exit ${codes[$i]}"; done
for rate in "${rates[@]}"; do echo "benchmark images/s: $rate"; done
echo "failures: lane $lane_failed, generated suite exit $suite_rc, direct runs $direct_failed; wall time $(($(date +%s) - started)) s"

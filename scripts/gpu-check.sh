#!/usr/bin/env bash
# One command for a machine with a CUDA GPU. By default it fits an 8-minute device window (GPU_CHECK_BUDGET, 420 s
# of its own wall time, summary included): a covering sample of the template's GPU lane (every model x precision
# x DDP on/off x checkpointing on/off, plus every model all-on and all-off, plus the two-GPU tests), the generated
# all-on repo's own suite, direct CUDA runs of its command line (a `--gpus 0,1` job when there are two GPUs), and
# the benchmark's CUDA path in a short mode (bare loop against the generated one: fp32 on both sides, then resnet50
# at 224 px in bf16 and channels-last as the GPU table has it), then one
# summary in which every number comes from a parsed result: JUnit XML for the test runs, exit codes and logs for
# the direct runs, bench.py's JSON for the rates. It exits non-zero when anything failed, timed out or was not run.
#
#   bash scripts/gpu-check.sh              # the short check (GPU_LANE=sample): about 7 minutes on one H200
#   bash scripts/gpu-check.sh --full       # the whole GPU lane (1,546 cases) and suite: 15-30 min, budget 5400 s
#   bash scripts/gpu-check.sh --dry-run    # no GPU needed: the plan, the lane's selection, the benchmark on the CPU
#   bash scripts/gpu-check.sh --self-test  # no GPU needed: the summary's JUnit reading on tiny CPU pytest runs
#   GPU_CHECK_WITHOUT_CUDA=1 GPU_CHECK_BUDGET=240 bash scripts/gpu-check.sh  # the plumbing on a CPU: must fail
#
# Uses .venv when scripts/setup.sh made one, else the system python3. Logs go to $OUT (or build/gpu-check), so that
# a remote run brings them back. Sourcing the file defines the functions without running anything.
set -uo pipefail

# The JUnit XML of one pytest run, as one summary line and a verdict (exit status 0 only when all is well):
# a timeout (exit 124/137 of `timeout`), a missing or unreadable XML, fewer cases reported than were collected,
# a failure or error, or a skip whose reason is not one of the allowed ones all fail it.
#   junit_summary LABEL XML PYTEST_EXIT EXPECTED_CASES|- ALLOWED_SKIP_REGEX|- SECONDS
junit_summary() {
    "$PY" - "$@" <<'PYTHON'
import collections, re, sys
import xml.etree.ElementTree as ET

label, path, code, expected, allowed, seconds = sys.argv[1:7]
code, problems = int(code), []
outcomes, reasons = {}, collections.Counter()
try:
    root = ET.parse(path).getroot()
except FileNotFoundError:
    root, problems = None, ["no JUnit XML written"]
except ET.ParseError as exc:
    root, problems = None, [f"unreadable JUnit XML ({exc})"]
rank = {"passed": 0, "skipped": 1, "failed": 2}
for case in root.iter("testcase") if root is not None else []:
    if not case.get("name"):  # what an interrupted run leaves for the case it was in: not a result
        continue
    key = (case.get("classname", ""), case.get("name"))
    if case.find("failure") is not None or case.find("error") is not None:
        outcome = "failed"
    elif case.find("skipped") is not None:
        outcome = "skipped"
        reason = case.find("skipped").get("message", "")
        reason = re.sub(r"^(Skipped: |unconditional skip)", "", reason) or "no reason given"
        if allowed == "-" or not re.search(allowed, reason):
            reasons[f"unexpected: {reason[:100]}"] += 1
        else:
            reasons[reason[:100]] += 1
    else:
        outcome = "passed"
    if rank[outcome] >= rank[outcomes.get(key, "passed")]:  # a teardown error after a pass fails the case
        outcomes[key] = outcome
counts = collections.Counter(outcomes.values())
reported = len(outcomes)
if code in (124, 137):
    problems.insert(0, f"TIMED OUT after {seconds} s (killed)")
elif code not in (0, 1) and not problems:
    problems.append(f"pytest exit {code} (interrupted, internal or usage error, or nothing collected)")
if code == 1 and counts["failed"] == 0 and root is not None:
    problems.append("pytest exit 1 without a failed case in the XML")
if expected != "-" and reported < int(expected):
    problems.append(f"{int(expected) - reported} of {expected} collected cases never reported")
if counts["failed"]:
    problems.append(f"{counts['failed']} failed")
unexpected = sum(n for reason, n in reasons.items() if reason.startswith("unexpected: "))
if unexpected:
    problems.append(f"{unexpected} skipped unexpectedly")
if root is not None and reported == 0 and not problems:
    problems.append("no case ran")
of = f" of {expected}" if expected != "-" else ""
skips = "; ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items()))
line = f"{label}: {reported}{of} cases reported: {counts['passed']} passed, {counts['failed']} failed, "
line += f"{counts['skipped']} skipped" + (f" [{skips}]" if skips else "") + f"; pytest exit {code}, {seconds} s"
print(line + (" -- FAILED: " + "; ".join(problems) if problems else " -- OK"))
sys.exit(1 if problems else 0)
PYTHON
}

# The test ids `pytest --collect-only -q ARGS...` lists (what a run with the same ARGS must report), as a count.
collected_count() {
    "$PY" -m pytest --collect-only -q -p no:cacheprovider -o addopts="" "$@" 2>/dev/null | grep -c '::'
}

# Seconds left before the deadline, less what the phases after this one need at least (RESERVE), capped at CAP;
# 0 when fewer than 10 are left (`timeout 0` would mean no limit at all: callers skip the phase instead).
seconds_for() {  # CAP RESERVE
    local left=$((deadline - $(date +%s) - $2))
    left=$((left < $1 ? left : $1))
    echo $((left < 10 ? 0 : left))
}

self_test() {
    # junit_summary's verdicts on the outcomes that matter, from real (tiny, CPU) pytest runs.
    local dir failures=0 verdict
    dir=$(mktemp -d)
    cat >"$dir/test_tiny.py" <<'EOF'
import os, time
import pytest

def test_passes():
    pass

@pytest.mark.skip(reason="needs a machine with at least 2 GPUs")
def test_two_gpus():
    pass

@pytest.mark.skipif(os.environ.get("TINY") == "other-skip", reason="CUDA is not available")
def test_other_skip():
    pass

@pytest.mark.skipif(os.environ.get("TINY") != "fail", reason="runs only when asked to fail")
def test_fails():
    assert False

@pytest.mark.skipif(os.environ.get("TINY") != "hang", reason="runs only when asked to hang")
def test_hangs():
    time.sleep(60)
EOF
    tiny() {  # SCENARIO [SECONDS]: the tiny suite run as the lane runs (xdist, JUnit XML, timeout with SIGINT)
        rm -f "$dir/out.xml"
        (cd "$dir" && TINY=$1 timeout -s INT -k 10 "${2:-300}" "$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
            --basetemp "$dir/bt" -n 1 --junitxml "$dir/out.xml" test_tiny.py >"$dir/$1.log" 2>&1)
    }
    expect() {  # WANT(OK|FAILED) PATTERN LABEL XML CODE EXPECTED ALLOWED
        local want=$1 pattern=$2
        shift 2
        verdict=$(junit_summary "$@" 0)
        if [[ $verdict == *"-- $want"* && $verdict =~ $pattern ]]; then
            echo "ok: $verdict"
        else
            echo "WRONG (wanted $want and /$pattern/): $verdict"
            failures=$((failures + 1))
        fi
    }
    local allowed="at least 2 GPUs|asked to"
    tiny pass
    expect OK "^pass: 5 of 5 cases reported: 2 passed, 0 failed, 3 skipped .* -- OK$" pass "$dir/out.xml" $? 5 "$allowed"
    cp "$dir/out.xml" "$dir/passed.xml"
    tiny fail
    expect FAILED ": 2 passed, 1 failed, 2 skipped.*FAILED: 1 failed$" fail "$dir/out.xml" $? 5 "$allowed"
    tiny other-skip
    expect FAILED "unexpected: CUDA is not available: 1.*FAILED: 1 skipped unexpectedly$" other-skip "$dir/out.xml" $? 5 \
        "$allowed"
    tiny hang 15
    expect FAILED "FAILED: TIMED OUT after 0 s \(killed\); 1 of 5 collected cases never reported$" hang \
        "$dir/out.xml" $? 5 "$allowed"
    expect FAILED "FAILED: no JUnit XML written" missing "$dir/nothing.xml" 0 5 "$allowed"
    head -c 300 "$dir/passed.xml" >"$dir/cut.xml"
    expect FAILED "FAILED: unreadable JUnit XML" cut "$dir/cut.xml" 0 5 "$allowed"
    expect FAILED "5 of 7 cases reported.*FAILED: 2 of 7 collected cases never reported$" fewer "$dir/passed.xml" 0 7 \
        "$allowed"
    expect FAILED "FAILED: pytest exit 1 without a failed case" inconsistent "$dir/passed.xml" 1 5 "$allowed"
    expect FAILED "FAILED: pytest exit 2" interrupted "$dir/passed.xml" 2 5 "$allowed"
    expect OK "5 cases reported: 2 passed.* -- OK$" no-expectation "$dir/passed.xml" 0 - "$allowed"
    local count
    count=$(cd "$dir" && collected_count test_tiny.py)
    if [ "$count" = 5 ]; then
        echo "ok: collected_count says 5"
    else
        echo "WRONG: collected_count said $count"
        failures=$((failures + 1))
    fi
    rm -rf "$dir"
    echo "self-test: $failures wrong"
    return $((failures > 0))
}

main() {
    local mode=sample
    case "${1:-}" in
    "") ;;
    --full) mode=full ;;
    --dry-run) mode=dry ;;
    --self-test) mode=self ;;
    *) echo "usage: bash scripts/gpu-check.sh [--full | --dry-run | --self-test]" >&2; return 2 ;;
    esac
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1
    local root=$PWD
    LOGS="${OUT:-build/gpu-check}"
    mkdir -p "$LOGS" && LOGS=$(cd "$LOGS" && pwd)
    PY=python3
    [ -x .venv/bin/python ] && PY=$PWD/.venv/bin/python
    # An offline GPU machine without the test dependencies: wheels carried in .whl/ (see the device notes).
    if ! "$PY" -c "import cookiecutter, pytest_cookies, torchinfo" 2>/dev/null && [ -d .whl ]; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-site .whl/*.whl
        export PYTHONPATH=/tmp/gpu-site:${PYTHONPATH:-}
    fi
    export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
    if [ "$mode" = self ]; then
        self_test
        return
    fi

    local started budget
    started=$(date +%s)
    budget=${GPU_CHECK_BUDGET:-$([ "$mode" = full ] && echo 5400 || echo 420)}
    deadline=$((started + budget))
    local problems=() lines=()
    fail() { problems+=("$1"); }
    judged() {  # LINE: keep a summary line; one that does not end in "-- OK" is a failure of PHASE
        lines+=("$1")
        [[ $1 == *"-- OK" ]] || fail "$2"
    }

    # 0. The machine, and what --compile needs: a C compiler and Python's headers.
    "$PY" - >"$LOGS/env.json" <<'PYTHON'
import json, os, shutil, sysconfig, torch
cuda = torch.cuda.is_available()
print(json.dumps({
    "torch": torch.__version__, "cuda": cuda, "gpus": torch.cuda.device_count() if cuda else 0,
    "name": torch.cuda.get_device_name(0) if cuda else "",
    "cc": shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc") or "",
    "python_h": os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
}))
PYTHON
    env_field() { "$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$LOGS/env.json" "$1"; }
    local cuda gpus smi_gpus
    cuda=$(env_field cuda)
    gpus=$(env_field gpus)
    smi_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$LOGS/nvidia-smi.txt" 2>&1
    lines+=("machine: torch $(env_field torch), CUDA $cuda $(env_field name); GPUs: $gpus (torch), $smi_gpus (nvidia-smi -L)")
    # GPU_CHECK_WITHOUT_CUDA=1 runs the real thing anyway, to test this script's plumbing on a CPU machine: every
    # CUDA case then fails or skips, and the summary and the exit status must say so.
    if [ "$cuda" != True ] && [ "$mode" != dry ] && [ -z "${GPU_CHECK_WITHOUT_CUDA:-}" ]; then
        echo "CUDA is not available here: nothing to check (--dry-run and --self-test run without a GPU)" >&2
        return 2
    fi

    # Renders: the all-on one (its suite, the direct runs), the default one (the benchmark: fp32, as the bare loop),
    # the default one with AMP (the GPU table's setting: bf16).
    local renders=$root/build/gpu-renders on
    rm -rf "$renders" && mkdir -p "$renders/all-on" "$renders/default" "$renders/default-amp"
    on=$("$PY" scripts/named_answers.py all-on) || fail "the all-on answers (scripts/named_answers.py)"
    render() {  # FOLDER ANSWERS...
        local out=$1
        shift
        "$PY" -c "import sys; sys.path.insert(0, '.'); from cookiecutter.cli import main; main()" . --no-input \
            -o "$out" "$@" >>"$LOGS/render.log" 2>&1
    }
    # shellcheck disable=SC2086  # the answers are words
    render "$renders/all-on" $on amp_precision=fp16 gpu_ids=0 || fail "render of the all-on project"
    render "$renders/default" || fail "render of the default project"
    render "$renders/default-amp" use_amp=True amp_precision=bf16 || fail "render of the default project with AMP"
    local project=$renders/all-on/my-project bench_src=$renders/default/my-project/src
    local amp_src=$renders/default-amp/my-project/src
    local workers=$(($(nproc) > 12 ? 12 : $(nproc)))  # each case is mostly CPU work around a short CUDA run
    workers=${GPU_CHECK_WORKERS:-$workers}
    local t0 t rc expected

    # 1. The template's GPU lane: the covering sample (GPU_LANE=sample, see tests/test_matrix.py), or all of it.
    # pytest's per-test limit sits above the smoke child's own (SMOKE_TIMEOUT), so that the child is killed first.
    local lane_args=(tests/test_matrix.py tests/test_distributed.py -m gpu) lane=sample smoke_timeout lane_timeout
    [ "$mode" = full ] && lane=full
    smoke_timeout=$(sed -n 's/^SMOKE_TIMEOUT = \([0-9][0-9]*\).*/\1/p' tests/test_matrix.py)
    lane_timeout=$((${smoke_timeout:-240} + 60))
    expected=$(GPU_LANE=$lane collected_count "${lane_args[@]}")
    if [ "$mode" = dry ]; then
        lines+=("lane (dry run): GPU_LANE=$lane selects $expected cases; pytest --timeout $lane_timeout (smoke: ${smoke_timeout:-?} s)")
        [ "${expected:-0}" -gt 0 ] || fail "the lane's selection is empty"
    else
        t0=$(date +%s)
        t=$(seconds_for "$([ "$mode" = full ] && echo 3600 || echo 200)" 180)
        GPU_LANE=$lane timeout -s INT -k 30 "$((t > 0 ? t : 1))" "$PY" -m pytest "${lane_args[@]}" -n "$workers" \
            -p no:cacheprovider -o addopts="" -q -rfEs --timeout "$lane_timeout" --junitxml "$LOGS/lane.xml" \
            >"$LOGS/lane.log" 2>&1
        rc=$?
        judged "$(junit_summary "lane (GPU_LANE=$lane, -m gpu)" "$LOGS/lane.xml" "$rc" "${expected:--}" \
            "at least 2 GPUs" $(($(date +%s) - t0)))" lane
        local matrix
        matrix=$(grep 'combination matrix' "$LOGS/lane.log" | tail -n 1)
        [ -z "$matrix" ] || lines+=("  as pytest counted it: $matrix")
        lines+=("  2-GPU tests of the lane: $("$PY" - "$LOGS/lane.xml" <<'PYTHON'
import sys, xml.etree.ElementTree as ET
try:
    cases = [c for c in ET.parse(sys.argv[1]).getroot().iter("testcase") if "test_distributed" in c.get("classname", "")]
except (OSError, ET.ParseError):
    cases = []
def outcome(c):
    if c.find("failure") is not None or c.find("error") is not None:
        return "failed"
    return "skipped" if c.find("skipped") is not None else "passed"
print(", ".join(f"{c.get('name')} {outcome(c)}" for c in cases) or "none reported")
PYTHON
)")
    fi

    # 2. Direct CUDA runs of the all-on render's command line, in the background while its suite runs (3.), side by
    # side (each mostly imports and a few GPU steps), the fp16 chain in order; judged by exit code and, where
    # given, a line their log must hold.
    local common=(train --device cuda --epochs 2 --max-steps-per-epoch 4 --batch-size 16 --no-plots --num-workers 2)
    local tricks=(--freeze features.0 --lr-mult fc=10 --mixup-alpha 0.4 --cutmix-alpha 1.0 --ema-decay 0.9)
    tricks+=(--clip-grad-norm 0.5)
    local direct_t direct_end py_m=("$PY" -m my_project)
    direct_t=$(seconds_for 150 100)
    direct_end=$(($(date +%s) + direct_t))  # one deadline for the phase: the fp16 chain's runs share it
    direct() {  # NAME EXPECTED_EXIT LOG_MUST_SAY|- COMMAND...: writes NAME|EXIT|EXPECTED|SAY|SECONDS to cmd-NAME.rc
        local name=$1 want=$2 say=$3 left=$((direct_end - $(date +%s)))
        shift 3
        if [ "$mode" = dry ] || [ "$left" -lt 10 ]; then
            echo "$name|$([ "$mode" = dry ] && echo dry || echo spent)|$want|$say|0" >"$LOGS/cmd-$name.rc"
            printf '%q ' "$@" >"$LOGS/cmd-$name.log"
            return
        fi
        (cd "$project" && PYTHONPATH=$project/src timeout -k 10 "$left" "$@" >"$LOGS/cmd-$name.log" 2>&1)
        echo "$name|$?|$want|$say|$left" >"$LOGS/cmd-$name.rc"
    }
    rm -f "$LOGS"/cmd-*.rc "$LOGS"/cmd-*.log
    {
        direct fp16 0 - "${py_m[@]}" "${common[@]}" "${tricks[@]}" --precision fp16 --output-dir runs/fp16
        direct fp16-resume 0 "resumed from" "${py_m[@]}" "${common[@]}" "${tricks[@]}" --precision fp16 \
            --output-dir runs/fp16 --resume auto --epochs 3
        direct evaluate 0 - "${py_m[@]}" evaluate --weights runs/fp16/model.pt --device cuda
        direct evaluate-cpu 0 - "${py_m[@]}" evaluate --weights runs/fp16/model.pt --device cpu --output-dir runs/evalcpu
    } &
    direct bf16-cl-det 0 - "${py_m[@]}" "${common[@]}" "${tricks[@]}" --precision bf16 --channels-last \
        --deterministic --output-dir runs/bf16 &
    local compile_skip=""
    [ -n "$(env_field cc)" ] || compile_skip="no C compiler (\$CC, cc or gcc) on PATH, which inductor needs"
    [ "$(env_field python_h)" = True ] ||
        compile_skip="${compile_skip:+$compile_skip; }no Python.h under sysconfig's include path (python3-dev)"
    [ -n "$compile_skip" ] || direct compile 0 - "${py_m[@]}" "${common[@]}" --compile --output-dir runs/compile &
    direct resnet18-profile 0 - "${py_m[@]}" "${common[@]}" --model resnet18 --profile --output-dir runs/resnet18 &
    direct torchrun1 0 "world size 1, backend nccl" "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 \
        -m my_project "${common[@]}" "${tricks[@]}" --output-dir runs/torchrun1 &
    direct nproc2-one-gpu 6 - "${py_m[@]}" "${common[@]}" --nproc 2 --output-dir runs/nproc2 &  # refused: exit 6
    direct gpus-empty 6 - "${py_m[@]}" "${common[@]}" --gpus "" --output-dir runs/nogpu &  # refused: exit 6
    if [ "${gpus:-0}" -ge 2 ] || [ "$mode" = dry ]; then  # a real two-GPU job, started the way a user types it
        direct gpus-0-1 0 "distributed: world size 2, backend nccl" "${py_m[@]}" "${common[@]}" "${tricks[@]}" \
            --gpus 0,1 --sync-bn --output-dir runs/gpus01 &
    fi

    # 3. The all-on render's own suite, CUDA tests included, next to the direct runs (with fewer workers). The
    # per-test limit sits above the longest wait for a child process in those tests (a two-rank job: 300 s).
    local suite_timeout suite_workers=$((workers > 6 ? workers - 4 : workers))
    suite_timeout=$(grep -rhoE 'timeout=[0-9]+' "$project/tests" 2>/dev/null | grep -oE '[0-9]+' | sort -n | tail -n 1)
    suite_timeout=$((${suite_timeout:-300} + 30))
    expected=$(cd "$project" && PYTHONPATH=$project/src collected_count)
    t=$(seconds_for "$([ "$mode" = full ] && echo 1200 || echo 150)" 100)
    if [ "$mode" = dry ]; then
        lines+=("generated suite (dry run): $expected cases collected; pytest --timeout $suite_timeout")
    elif [ "$t" -eq 0 ]; then
        judged "generated suite: NOT RUN: the budget is spent -- FAILED" "generated suite"
    else
        t0=$(date +%s)
        (cd "$project" && PYTHONPATH=$project/src timeout -s INT -k 30 "$t" "$PY" -m pytest -q -n "$suite_workers" \
            -p no:cacheprovider -rfEs --timeout "$suite_timeout" --basetemp "$renders/suite-tmp" \
            --junitxml "$LOGS/generated-suite.xml" >"$LOGS/generated-suite.log" 2>&1)
        rc=$?
        judged "$(junit_summary "generated suite (all-on render, fp16)" "$LOGS/generated-suite.xml" "$rc" \
            "${expected:--}" "without CUDA" $(($(date +%s) - t0)))" "generated suite"
    fi

    wait  # for the direct runs
    local record name want say limit
    for record in "$LOGS"/cmd-*.rc; do
        IFS='|' read -r name rc want say limit <"$record"
        if [ "$rc" = dry ]; then
            lines+=("direct $name (dry run, expecting exit $want): $(cat "$LOGS/cmd-$name.log")")
        elif [ "$rc" = spent ]; then
            judged "direct $name: NOT RUN: the budget is spent -- FAILED" "direct $name"
        elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            judged "direct $name: TIMED OUT after $limit s -- FAILED" "direct $name"
        elif [ "$rc" != "$want" ]; then
            judged "direct $name: exit $rc, expected $want -- FAILED" "direct $name"
        elif [ "$say" != - ] && ! grep -qF "$say" "$LOGS/cmd-$name.log"; then
            judged "direct $name: exit $rc, but its log lacks \"$say\" -- FAILED" "direct $name"
        else
            judged "direct $name: exit $rc$([ "$say" = - ] || echo ", log says \"$say\"") -- OK" "direct $name"
        fi
    done
    [ -z "$compile_skip" ] || lines+=("direct compile: SKIPPED: $compile_skip")
    if [ "$mode" != dry ] && [ "${gpus:-0}" -lt 2 ]; then
        lines+=("one GPU: 2-GPU paths not run (the --gpus 0,1 job and the lane's two NCCL tests)")
        [ "${smi_gpus:-0}" -lt 2 ] || lines+=("  (nvidia-smi -L lists $smi_gpus GPUs but torch sees $gpus: CUDA_VISIBLE_DEVICES?)")
    fi

    # 4. The benchmark's CUDA path, short: images/s of the bare PyTorch loop and of the generated one, both in
    # fp32 (no autocast on either side) on the default render; bench.py's first epoch is not timed. Then the GPU
    # table's setting (benchmarks/run.sh --cuda-path, which adds Lightning and Ignite): resnet50 at 224 px, bf16
    # autocast, channels-last, on a default render with use_amp; each run must report that its first convolution
    # got a channels-last input and returned bf16 (a dry run: small_cnn at 32 px, the plumbing only).
    local images=${BENCH_IMAGES:-$([ "$mode" = dry ] && echo 512 || echo 16384)} model
    # LABEL MODEL SRC IMAGES CHECK [BENCH ARGS...]: CHECK is Python on the run's JSON `r`; one summary line
    benchmark_pair() {
        local label=$1 model=$2 src=$3 count=$4 check=$5 loop json parsed ratio=-
        shift 5
        local -A rates=() devices=()
        for loop in bare generated; do
            t=$(seconds_for 90 5)
            json=not-run
            [ "$t" -eq 0 ] || json=$(timeout -k 5 "$t" "$PY" benchmarks/bench.py --one "$loop" "$model" \
                --src "$src" --images "$count" --epochs 2 "$@" 2>>"$LOGS/bench-stderr.log" |
                tail -n 1 | tee -a "$LOGS/bench.log")
            # "RATE|DEVICE" from bench.py's JSON, which must say it measured what the label says
            parsed=$("$PY" -c "import json, sys; r = json.loads(sys.argv[1]); assert $check; \
print(f\"{r['images_per_second']:.0f}|{r['device']}\")" "$json" 2>/dev/null)
            rates[$loop]="${parsed%%|*} img/s"
            devices[$loop]=${parsed#*|}
            if [ -z "$parsed" ]; then
                rates[$loop]=$([ "$json" = not-run ] && echo "NOT RUN (budget spent)" || echo FAILED)
                fail "benchmark $label $loop"
            fi
        done
        if [ -n "${devices[bare]}" ] && [ -n "${devices[generated]}" ]; then
            ratio=$("$PY" -c "import sys; print(f'{int(sys.argv[2]) / int(sys.argv[1]):.3f}')" \
                "${rates[bare]% img/s}" "${rates[generated]% img/s}")
        fi
        lines+=("benchmark $label, $count images x 2 epochs, first untimed; ${devices[bare]:-?}): \
bare ${rates[bare]}, generated ${rates[generated]}, generated/bare $ratio")
    }
    for model in small_cnn resnet18; do
        benchmark_pair "$model (fp32 on both sides, default render" "$model" "$bench_src" "$images" \
            "r['precision'] == 'fp32'" --precision fp32
    done
    local gpu_model=resnet50 gpu_size=224 gpu_images=${BENCH_IMAGES:-2048}
    [ "$mode" = dry ] && gpu_model=small_cnn gpu_size=32
    benchmark_pair "$gpu_model at $gpu_size px (bf16 autocast and channels-last on both sides, checked at the first \
convolution; default render with use_amp" "$gpu_model" "$amp_src" "$gpu_images" \
        "r['precision'] == 'bf16' and r['first_conv'] == {'input_channels_last': True, 'output_dtype': 'bfloat16'}" \
        --precision bf16 --channels-last --image-size "$gpu_size" --batch-size 128

    local wall=$(($(date +%s) - started))
    [ "$wall" -le "$budget" ] || lines+=("note: the check ran $wall s, over its budget of $budget s (GPU_CHECK_BUDGET)")
    echo "=== gpu-check summary (mode: $mode; budget $budget s; logs in $LOGS)"
    printf '%s\n' "${lines[@]}"
    if [ ${#problems[@]} -eq 0 ]; then
        echo "result: OK; wall time $wall s"
        return 0
    fi
    local joined
    joined=$(printf '%s, ' "${problems[@]}")
    echo "result: FAILED (${#problems[@]}): ${joined%, }; wall time $wall s"
    return 1
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main "$@"
    exit $?
fi

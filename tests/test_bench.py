"""The benchmark's GPU table, on the CPU: its plumbing. The loops it compares train in the memory layout and the
precision the table names, and each run says what its first convolution received and returned. (Lightning and
Ignite live in the benchmark's own environment, benchmarks/run.sh, not in the test suite's.)"""

import json
import os
import subprocess
import sys

import pytest
from render import ROOT, baked_project

pytestmark = pytest.mark.slow
GPU_TABLE = ["--precision", "bf16", "--channels-last"]  # what bench.py's cuda_path passes to every run


@pytest.fixture(scope="module")
def amp_src(cookies_session):
    """The GPU table's render: the defaults plus the mixed precision it trains in."""
    return baked_project(cookies_session, use_amp=True, amp_precision="bf16") / "src"


@pytest.mark.parametrize("loop", ["bare", "generated"])
@pytest.mark.parametrize(
    ("flags", "seen"),
    [
        ([], {"input_channels_last": False, "output_dtype": "float32"}),
        (GPU_TABLE, {"input_channels_last": True, "output_dtype": "bfloat16"}),
    ],
)
def test_each_loop_of_the_gpu_table_trains_in_the_layout_and_precision_it_names(amp_src, loop, flags, seen):
    command = [sys.executable, "benchmarks/bench.py", "--one", loop, "small_cnn", "--src", str(amp_src)]
    command += ["--images", "32", "--batch-size", "16", "--image-size", "32", "--epochs", "2", *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["first_conv"] == seen
    assert result["steps"] == 4 and result["images_per_second"] > 0

{% if cookiecutter.use_amp %}
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

from {{ cookiecutter.package_name }}.core.errors import UserError
from {{ cookiecutter.package_name }}.serving import inference
from {{ cookiecutter.package_name }}.training import amp
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.amp import (
    autocast,
    make_scaler,
    native_cpu_bf16,
    resolve_precision,
)
from {{ cookiecutter.package_name }}.training.train import train
{% if cookiecutter.use_ema %}
from {{ cookiecutter.package_name }}.tricks.ema import MovingAverage
{% endif %}

CPU = torch.device("cpu")


@pytest.fixture
def bf16_cpu(monkeypatch):
    """A CPU that computes bf16 natively, whatever this one does: the runs below train in bf16 (emulated here where
    this CPU has no bf16 instructions: slower, the same figures' kinds)."""
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)


def test_autocast_follows_the_device_in_use():
    layer = torch.nn.Linear(4, 4)
    with autocast("bf16", CPU):
        assert layer(torch.ones(1, 4)).dtype == torch.bfloat16
    with autocast("fp32", CPU):
        assert layer(torch.ones(1, 4)).dtype == torch.float32


def test_grad_scaler_only_for_fp16_on_cuda():
    assert not make_scaler("fp16", CPU).is_enabled()
    assert not make_scaler("bf16", CPU).is_enabled()
    if torch.cuda.is_available():
        assert make_scaler("fp16", torch.device("cuda")).is_enabled()


def test_fp16_falls_back_to_bf16_on_the_cpu_with_one_line(capsys, bf16_cpu):
    assert resolve_precision("fp16", CPU) == "bf16" and resolve_precision("bf16", CPU) == "bf16"
    assert capsys.readouterr().err.startswith("fp16 mixed precision needs a GPU or another accelerator: using bf16 on")


def test_a_cpu_without_native_bf16_trains_in_fp32_and_says_why(tiny_config, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    for asked in ("bf16", "fp16"):
        result = train(replace(tiny_config, precision=asked, output_dir=str(tmp_path / asked)))
        assert result["config"].precision == "fp32"  # the run and its config.yaml say fp32
        assert yaml.safe_load((tmp_path / asked / "config.yaml").read_text())["precision"] == "fp32"
        err = capsys.readouterr().err
        assert "this CPU has no native bf16 (it would train about 8x slower than in fp32): using fp32." in err


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads the CPU's flags from Linux")
def test_native_bf16_is_what_the_cpus_flags_say():
    """x86: AVX-512 (BW, VL, DQ: oneDNN's bf16 kernels) or AMX; Arm: the BF16 feature."""
    flags = set(Path("/proc/cpuinfo").read_text().split())
    native = {"avx512bw", "avx512vl", "avx512dq"} <= flags or "amx_bf16" in flags or "bf16" in flags
    assert native_cpu_bf16() == native


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_fp16_stays_fp16_on_a_gpu():
    assert resolve_precision("fp16", torch.device("cuda")) == "fp16"


def test_bf16_training_runs_the_forward_in_bf16_and_keeps_fp32_weights(tiny_config, watch, bf16_cpu):
    result = train(replace(tiny_config, precision="bf16"))
    assert {logits.dtype for logits in watch.logits} == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in result["model"].parameters())  # the optimizer's copy stays fp32
    rows = result["metrics"]
    assert torch.isfinite(torch.tensor([rows[0]["train_loss"], rows[0]["val_loss"]])).all()


@pytest.mark.parametrize(("capability", "accepted"), [((7, 5), False), ((8, 0), True), ((9, 0), True)])
def test_bf16_needs_a_gpu_that_computes_it_natively(monkeypatch, capability, accepted):
    """is_bf16_supported() says yes for a Turing GPU that emulates bf16; the compute capability tells."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    if accepted:
        assert resolve_precision("bf16", torch.device("cuda", 0)) == "bf16"
    else:
        with pytest.raises(UserError, match="Some GPU has no native bf16 .*use --precision fp16"):
            resolve_precision("bf16", torch.device("cuda", 0))


def test_evaluate_of_an_fp16_run_on_the_cpu_autocasts_in_bf16(tiny_config, tmp_path, monkeypatch, capsys, bf16_cpu):
    """The saved precision belongs to the training device; evaluation resolves it for its own."""
    train(replace(tiny_config, precision="fp16"))  # on the CPU: trained in bf16, saved as such
    config = tmp_path / "run" / "config.yaml"
    config.write_text(config.read_text().replace("precision: bf16", "precision: fp16"))  # as a GPU run saves it
    seen = []
    real = inference.evaluate
    monkeypatch.setattr(inference, "evaluate", lambda *args, **kw: seen.append(args[2].precision) or real(*args, **kw))
    inference.evaluate_run(str(tmp_path / "run" / "model.pt"), CPU)
    assert seen == ["bf16"]  # the runtime evaluate ran with
    assert "using bf16 on the CPU" in capsys.readouterr().err
{% if cookiecutter.use_checkpointing %}


def test_the_checkpoint_holds_the_precision_the_run_trained_in(tiny_config, tmp_path):
    """fp16 asked for on a CPU trains in bf16 (or fp32): last.pt's config says what config.yaml says, so a resume
    with the same flags changes nothing."""
    train(replace(tiny_config, precision="fp16"))
    run = tmp_path / "run"
    trained_in = yaml.safe_load((run / "config.yaml").read_text())["precision"]
    assert trained_in != "fp16" and torch.load(run / "last.pt", weights_only=True)["config"]["precision"] == trained_in
{% endif %}


class OverflowOnce(torch.autograd.Function):
    """The identity; its first backward makes every gradient infinite, as an fp16 overflow does."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        OverflowOnce.calls += 1
        return grad * float("inf") if OverflowOnce.calls == 1 else grad


class Overflow(nn.Module):
    def forward(self, x):
        return OverflowOnce.apply(x)


def test_a_step_the_scaler_skips_leaves_no_trace_in_the_statistics(tiny_config, monkeypatch):
    """fp16's GradScaler skips a step whose gradients overflowed and halves its scale; that step must not count.
    A scaler on the CPU plays the part here (the GPU lane runs the real one)."""
    scalers, build_model = [torch.amp.GradScaler("cpu")], train_module.build_model
    monkeypatch.setattr(OverflowOnce, "calls", 0)
    monkeypatch.setattr(amp, "make_scaler", lambda *args: scalers[0])
    monkeypatch.setattr(train_module, "build_model", lambda *args: nn.Sequential(build_model(*args), Overflow()))
{% if cookiecutter.use_ema %}
    built, build_tricks = [], train_module.build_tricks
    monkeypatch.setattr(train_module, "build_tricks", lambda *args: built.append(build_tricks(*args)) or built[-1])
{% endif %}
{% if cookiecutter.use_grad_clipping %}
    result = train(replace(tiny_config, precision="bf16", clip_grad_norm=1.0))
{% else %}
    train(replace(tiny_config, precision="bf16"))
{% endif %}
    assert scalers[0].get_scale() == 2.0**16 / 2  # the first of the two steps was skipped
{% if cookiecutter.use_grad_clipping %}
    assert torch.isfinite(torch.tensor(result["metrics"][0]["grad_norm"]))  # the mean of the step taken only
{% endif %}
{% if cookiecutter.use_ema %}
    (average,) = [trick.average for trick in built[0] if isinstance(trick, MovingAverage)]
    assert int(average.n_averaged) == 1  # the average followed the step that was taken, only
{% endif %}
{% endif %}

from dataclasses import replace

import pytest
import torch

from {{ cookiecutter.package_name }}.amp import autocast, make_scaler, resolve_precision
from {{ cookiecutter.package_name }}.train import train

CPU = torch.device("cpu")


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


def test_fp16_falls_back_to_bf16_on_the_cpu_with_one_line(capsys):
    assert resolve_precision("fp16", CPU) == "bf16" and resolve_precision("bf16", CPU) == "bf16"
    assert capsys.readouterr().err == "fp16 mixed precision needs a CUDA GPU: using bf16 on the CPU.\n"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_fp16_stays_fp16_on_a_gpu():
    assert resolve_precision("fp16", torch.device("cuda")) == "fp16"


def test_bf16_training_runs_the_forward_in_bf16_and_keeps_fp32_weights(tiny_config, watch):
    result = train(replace(tiny_config, precision="bf16"))
    assert {logits.dtype for logits in watch.logits} == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in result["model"].parameters())  # the optimizer's copy stays fp32
    rows = result["metrics"]
    assert torch.isfinite(torch.tensor([rows[0]["train_loss"], rows[0]["val_loss"]])).all()

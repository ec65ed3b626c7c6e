from dataclasses import replace

import pytest
import torch

from {{ cookiecutter.package_name }}.amp import autocast, check_precision, make_scaler
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU to ask it about bf16")
def test_precision_check_on_gpu():
    check_precision("fp16", torch.device("cuda"))


def test_bf16_training_step_on_cpu(tiny_config):
    rows = train(replace(tiny_config, precision="bf16"))["metrics"]
    assert torch.isfinite(torch.tensor([rows[0]["train_loss"], rows[0]["val_loss"]])).all()

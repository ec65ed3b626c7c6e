import json
from dataclasses import replace

import pytest
import torch
from torch import nn

from {{ cookiecutter.package_name }}.core.errors import TrainingDiverged
from {{ cookiecutter.package_name }}.training import profiling
from {{ cookiecutter.package_name }}.training import train as train_module
from {{ cookiecutter.package_name }}.training.train import train


class NanGradient(torch.autograd.Function):
    """The identity forward, NaN backward: a bug that only shows in the gradients."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def nan_gradient_model(name, classes, *rest):
    layer = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, classes))
    return nn.Sequential(layer, type("Bug", (nn.Module,), {"forward": lambda self, x: NanGradient.apply(x)})())


def test_profile_writes_a_trace_and_a_table_and_changes_nothing(tiny_config, tmp_path):
    profiled = train(replace(tiny_config, max_steps_per_epoch=4, profile=True))
    folder = tmp_path / "run" / "profile"
    events = json.loads((folder / "trace.json").read_text())["traceEvents"]
    assert any(event.get("name") == "aten::convolution" for event in events)
    table = (folder / "top_operators.txt").read_text()
    assert "Self CPU" in table and "aten::" in table
    plain = train(replace(tiny_config, max_steps_per_epoch=4, output_dir=str(tmp_path / "plain")))
    pairs = zip(profiled["model"].parameters(), plain["model"].parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_detect_anomaly_names_the_operation_behind_a_nan_gradient(tiny_config, monkeypatch):
    monkeypatch.setattr(train_module, "build_model", nan_gradient_model)
    # the warning carries the traceback of the forward call that built the failing backward
    with pytest.warns(UserWarning, match="Error detected in NanGradientBackward"):
        with pytest.raises(RuntimeError, match="Function 'NanGradientBackward' returned nan values"):
            train(replace(tiny_config, detect_anomaly=True))
    # without it, the NaN shows only one step later, in the loss
    with pytest.raises(TrainingDiverged, match="at step 2"):
        train(replace(tiny_config, detect_anomaly=False, overwrite=True))


def test_profile_records_cuda_activity_only_when_training_on_a_gpu(tiny_config, monkeypatch):
    """A CPU run on a machine with a GPU profiles the CPU alone: the activities follow the training device."""
    activities = []
    real = profiling.profile
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU is visible ...
    monkeypatch.setattr(profiling, "profile", lambda **kw: activities.append(kw["activities"]) or real(**kw))
    train(replace(tiny_config, profile=True, device="cpu"))  # ... but the run trains on the CPU
    assert activities == [[torch.profiler.ProfilerActivity.CPU]]

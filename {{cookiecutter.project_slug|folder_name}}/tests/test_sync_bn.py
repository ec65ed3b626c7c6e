{% if cookiecutter.use_sync_bn %}
import torch
import torch.distributed as dist
from torch import nn

from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.tricks import sync_bn
from {{ cookiecutter.package_name }}.tricks.sync_bn import convert_sync_bn, is_distributed_cuda


def test_conversion_keeps_weights_and_buffers_under_a_process_group(tmp_path, monkeypatch):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = SmallCNN(10)
        model.features[0][1].running_mean.fill_(0.5)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        # One CPU process stands in for a multi-GPU job: the decision is tested separately below.
        monkeypatch.setattr(convert_sync_bn.__module__ + ".is_distributed_cuda", lambda device: True)
        converted = convert_sync_bn(model, torch.device("cpu"))
    finally:
        dist.destroy_process_group()
    kinds = {type(m) for m in converted.modules()}
    assert nn.SyncBatchNorm in kinds and nn.BatchNorm2d not in kinds
    after = converted.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_cpu_keeps_batchnorm_quietly_in_one_process_and_says_so_in_a_job_of_several(tmp_path, monkeypatch, capsys):
    model = convert_sync_bn(SmallCNN(10), torch.device("cpu"))
    assert nn.SyncBatchNorm not in {type(m) for m in model.modules()}
    assert capsys.readouterr().err == ""  # BatchNorm over the whole batch already: the same statistics
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        monkeypatch.setattr(dist, "get_world_size", lambda: 2)  # stands in for a second CPU process
        model = convert_sync_bn(SmallCNN(10), torch.device("cpu"))
    finally:
        dist.destroy_process_group()
    assert nn.SyncBatchNorm not in {type(m) for m in model.modules()}
    notice = "SyncBatchNorm needs CUDA: each CPU process keeps BatchNorm over its own share."
    assert capsys.readouterr().err.splitlines() == [notice]  # from rank 0 only:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store2'}", rank=0, world_size=1)
    try:
        monkeypatch.setattr(dist, "get_rank", lambda: 1)
        convert_sync_bn(SmallCNN(10), torch.device("cpu"))
    finally:
        dist.destroy_process_group()
    assert capsys.readouterr().err == ""


def test_switched_off_at_run_time_it_is_not_built():
    assert sync_bn.build(TrainConfig(sync_bn=False), num_classes=10) is None
    assert isinstance(sync_bn.build(TrainConfig(), num_classes=10), sync_bn.SyncBatchNorm)


def test_the_decision_converts_in_a_cuda_process_group_of_any_size_only(tmp_path, monkeypatch):
    cuda = torch.device("cuda", 0)
    assert not is_distributed_cuda(cuda)  # no process group: one plain process
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert is_distributed_cuda(cuda) and not is_distributed_cuda(torch.device("cpu"))
    finally:
        dist.destroy_process_group()
{% endif %}

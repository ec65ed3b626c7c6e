import csv

import pytest
import torch

from {{ cookiecutter.package_name }} import distributed
from {{ cookiecutter.package_name }} import train as train_module
from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.config import TrainConfig
from {{ cookiecutter.package_name }}.errors import UserError


@pytest.mark.parametrize(("world", "size"), [(2, 10), (3, 10), (4, 3)])
def test_validation_shards_cover_every_image_exactly_once(monkeypatch, world, size):
    shards = []
    for rank in range(world):
        monkeypatch.setattr(distributed, "rank", lambda rank=rank: rank)
        monkeypatch.setattr(distributed, "world_size", lambda: world)
        shards.append(list(distributed.ShardSampler(range(size))))
    assert sorted(index for shard in shards for index in shard) == list(range(size))


@pytest.mark.parametrize(
    ("answers", "cuda", "expected"),
    [
        ({"gpus": "0,1,2"}, True, 3),
        ({"gpus": "0,1,2"}, False, 1),
        ({"gpus": "0,1", "device": "cpu"}, True, 1),
        ({"gpus": "", "device": "cpu", "nproc": 2}, False, 2),
    ],
)
def test_one_worker_per_gpu_id_or_as_many_as_nproc(monkeypatch, answers, cuda, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert distributed.workers_wanted(TrainConfig(**answers)) == expected


def test_a_global_batch_must_divide_by_the_world(tiny_config, monkeypatch):
    monkeypatch.setattr(train_module, "world_size", lambda: 3)
    with pytest.raises(UserError, match="--batch-size 16 is global and must divide by the 3 processes"):
        train_module.train(tiny_config)


def test_two_cpu_workers_through_the_launcher(tiny_config, tmp_path, capfd):
    run = tmp_path / "two"
    args = ["train", "--device", "cpu", "--nproc", "2", "--epochs", "2", "--max-steps-per-epoch", "2"]
    assert main([*args, "--batch-size", "8", "--num-workers", "0", "--output-dir", str(run)]) == 0
    out = capfd.readouterr().out
    assert out.count("distributed: world size 2, backend gloo") == 1  # rank 0 alone prints
    with open(run / "metrics.csv") as file:
        assert [row["epoch"] for row in csv.DictReader(file)] == ["1", "2"]
    assert not any(key.startswith("module.") for key in torch.load(run / "model.pt", weights_only=True))

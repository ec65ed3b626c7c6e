{% if cookiecutter.use_grad_clipping %}
from dataclasses import replace

import pytest
import torch
from conftest import CRITERION, SYNTHETIC_CLASSES

from {{ cookiecutter.package_name }}.data.loaders import build_data
from {{ cookiecutter.package_name }}.models import SmallCNN
from {{ cookiecutter.package_name }}.training.engine import Runtime, train_one_epoch
from {{ cookiecutter.package_name }}.training.train import resolve, train
from {{ cookiecutter.package_name }}.tricks import grad_clipping

CPU = torch.device("cpu")
PRECISIONS = [
{% if cookiecutter.use_amp %}
    ("fp32", False),
    ("bf16", False),
    ("fp16", True),  # with GradScaler("cpu"): the gradients must be unscaled before clipping
{% else %}
    ("fp32", False),
{% endif %}
]


def total_norm(parameters, norm_type: float = 2.0) -> float:
    norms = [p.grad.norm(norm_type) for p in parameters if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms), norm_type).item()


def clipped_epoch(tiny_config, precision: str, scaled: bool, **changes) -> tuple[list[float], dict]:
    """Three steps clipped at 0.05 (unless `changes` say otherwise): the norm of the gradients each optimizer step
    received, and the epoch's stats."""
    cfg = resolve(replace(tiny_config, **{"clip_grad_norm": 0.05, "lr": 0.5, "max_steps_per_epoch": 3, **changes}))
{% if cookiecutter.use_amp %}
    cfg = replace(cfg, precision=precision)
{% endif %}
    torch.manual_seed(0)
    model = SmallCNN(SYNTHETIC_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    norms = []
    norm_type = cfg.clip_grad_norm_type
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: norms.append(total_norm(model.parameters(), norm_type)))
    clipping = grad_clipping.build(cfg, SYNTHETIC_CLASSES)
    runtime = Runtime(CPU, cfg)
{% if cookiecutter.use_amp %}
    # this precision as it is, even where the CPU would take another; fp16 as it would be scaled on a GPU
    runtime.precision, runtime.scaler = precision, torch.amp.GradScaler("cpu", init_scale=2.0**12, enabled=scaled)
{% endif %}
    batches = build_data(cfg, CPU).train
    loop = {"accumulate_steps": cfg.accumulate_steps, "max_steps": cfg.max_steps_per_epoch}
    stats = train_one_epoch(model, batches, CRITERION(), optimizer, runtime, [clipping], **loop)
    return norms, stats | clipping.after_epoch(1, model, validate=None)


@pytest.mark.parametrize(("precision", "scaled"), PRECISIONS)
def test_gradients_reaching_the_optimizer_are_clipped(tiny_config, precision, scaled):
    norms, stats = clipped_epoch(tiny_config, precision, scaled)
    # Exactly at the limit (every step's raw norm is above it): clipping loss-scaled gradients would leave
    # them thousands of times smaller, which an upper bound alone cannot tell apart.
    assert norms == pytest.approx([0.05] * 3, rel=1e-3)
    _, reference = clipped_epoch(tiny_config, "fp32", False)
    assert stats["grad_norm"] > 0.05  # the logged norm is the one before clipping, in true (unscaled) units
    assert stats["grad_norm"] == pytest.approx(reference["grad_norm"], rel=0.05)


def test_the_logged_norm_is_the_mean_over_optimizer_steps_not_batches(tiny_config):
    # 4 batches in groups of 2: two optimizer steps, each on its group's gradient; a limit that never clips
    changes = {"clip_grad_norm": 1e6, "accumulate_steps": 2, "max_steps_per_epoch": 4}
    norms, stats = clipped_epoch(tiny_config, "fp32", False, **changes)
    assert len(norms) == 2
    assert stats["grad_norm"] == pytest.approx(sum(norms) / 2, rel=1e-5)


def test_one_step_logs_its_own_norm_of_the_type_asked_for(tiny_config):
    changes = {"clip_grad_norm": 1e6, "clip_grad_norm_type": 1.0, "max_steps_per_epoch": 1}  # L1, never clipping
    norms, stats = clipped_epoch(tiny_config, "fp32", False, **changes)
    assert len(norms) == 1 and stats["grad_norm"] == pytest.approx(norms[0], rel=1e-5)
    assert norms[0] > 2 * clipped_epoch(tiny_config, "fp32", False, **changes | {"clip_grad_norm_type": 2.0})[0][0]


def test_a_saved_state_that_is_not_the_epochs_sums_is_refused():
    clipping = grad_clipping.GradClipping(1.0, 2.0)
    for good in ({"norm_sum": None, "steps": 0}, {"norm_sum": torch.tensor(3.0), "steps": 2}):
        clipping.load_state_dict(good)
        assert (clipping.norm_sum, clipping.steps) == (good["norm_sum"], good["steps"])
    bad = [
        {"norm_sum": None, "steps": "2"},
        {"norm_sum": None, "steps": -1},
        {"norm_sum": torch.tensor(3.0), "steps": 0},
        {"norm_sum": None, "steps": 2},
        {"norm_sum": 3.0, "steps": 2},
        {"norm_sum": torch.ones(2), "steps": 2},
    ]
    for state in bad:  # a ValueError: the checkpoint's loader says in one line that it does not fit
        with pytest.raises(ValueError):
            clipping.load_state_dict(state)


{% if cookiecutter.use_checkpointing %}
def test_an_epoch_end_checkpoint_without_the_clipping_sums_resumes_as_if_it_had_them(tiny_config, tmp_path):
    """A checkpoint saved after an epoch by a version of this project that kept the sums elsewhere: at an epoch's end
    they are empty, so the resumed run logs the grad_norm an uninterrupted one does."""
    cfg = replace(tiny_config, clip_grad_norm=0.05, max_steps_per_epoch=3, deterministic=True)
    straight = train(replace(cfg, epochs=2, output_dir=str(tmp_path / "straight")))["metrics"]
    first = replace(cfg, epochs=1, output_dir=str(tmp_path / "cut"))
    train(first)
    last = tmp_path / "cut" / "last.pt"
    state = torch.load(last, weights_only=True)
    del state["grad_clipping"]
    torch.save(state, last)
    resumed = train(replace(first, epochs=2, resume="auto"))["metrics"]
    assert resumed[1]["grad_norm"] == straight[1]["grad_norm"] > 0


{% endif %}
def test_clip_norm_is_logged_per_epoch_and_zero_turns_it_off(tiny_config, tmp_path):
    columns = [*train(replace(tiny_config, clip_grad_norm=1.0))["metrics"][0]]
    assert columns.index("val_acc") < columns.index("grad_norm") < columns.index("lr")  # the rates close the row
    off = replace(tiny_config, clip_grad_norm=0.0, output_dir=str(tmp_path / "off"))
    assert "grad_norm" not in train(off)["metrics"][0]
{% endif %}

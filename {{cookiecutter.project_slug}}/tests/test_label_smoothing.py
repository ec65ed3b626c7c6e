from dataclasses import replace

import torch

from {{ cookiecutter.package_name }} import train as train_module


def reference_loss(logits: torch.Tensor, targets: torch.Tensor, eps: float) -> torch.Tensor:
    """Cross-entropy against (1 - eps) * one_hot + eps / classes, written out by hand."""
    log_p = logits.log_softmax(1)
    classes = logits.shape[1]
    target_term = (1 - eps) * log_p[torch.arange(len(targets)), targets]
    uniform_term = eps / classes * log_p.sum(1)
    return -(target_term + uniform_term).mean()


def test_the_training_loss_equals_the_closed_form(tiny_config, monkeypatch):
    used = []
    original = train_module.train_one_epoch

    def spy(model, loader, criterion, *args, **kwargs):
        used.append(criterion)
        return original(model, loader, criterion, *args, **kwargs)

    monkeypatch.setattr(train_module, "train_one_epoch", spy)
    train_module.train(replace(tiny_config, label_smoothing=0.2))
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0], [-0.5, 1.5, 0.0]])
    targets = torch.tensor([0, 2, 1])
    assert torch.allclose(used[0](logits, targets), reference_loss(logits, targets, 0.2))
    assert not torch.allclose(used[0](logits, targets), reference_loss(logits, targets, 0.0))

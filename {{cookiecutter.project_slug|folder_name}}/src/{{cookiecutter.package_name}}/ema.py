"""Exponential moving average of the weights, with PyTorch's own torch.optim.swa_utils.AveragedModel.

After every optimizer step: ema = decay * ema + (1 - decay) * weights. The average is evaluated each epoch
next to the trained model and saved as ema.pt; it often generalises better than the last weights.
"""

from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def build_ema(model: nn.Module, decay: float) -> AveragedModel | None:
    """None when --ema-decay is 0. BatchNorm policy: use_buffers=True averages the running statistics like
    the weights, so the average is evaluated with statistics that belong to it (no extra pass over the data)."""
    if not decay:
        return None
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)

{% if cookiecutter.task == "multi_label" %}
"""Multi-label figures (AP, mAP, F1, thresholds) computed in torch, equal to scikit-learn's with zero_division=0.

scores and targets are [images, classes]: scores any real numbers (higher means more likely), targets 0/1 or bool.
Everything stays on the device of its inputs; sums are float64, so that the figures match scikit-learn to 1e-9.
"""

from pathlib import Path

import torch

from .metrics import write_csv


def correct(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """How many images have every label right at probability 0.5 (logit 0); a mixed image's labels count as the
    larger share."""
    return ((logits >= 0) == (targets >= 0.5)).all(1).sum()


def _ranked(scores: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per class: the scores sorted high to low, the targets in that order, and at each position the true positives
    and the predicted count of `scores >= that position's score`, so a group of equal scores counts whole (ties)."""
    ranked, order = scores.sort(dim=0, descending=True)
    hits = targets.gather(0, order).double()
    positions = torch.arange(len(scores), device=scores.device).unsqueeze(1).expand_as(scores)
    group_ends = torch.ones_like(ranked, dtype=torch.bool)
    group_ends[:-1] = ranked[:-1] != ranked[1:]
    # the first group end at or after each position: a running minimum from the bottom up
    last = torch.where(group_ends, positions, len(scores) - 1).flip(0).cummin(0).values.flip(0)
    return ranked, hits, hits.cumsum(0).gather(0, last), (last + 1).double()


def average_precision(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-class AP as sklearn.metrics.average_precision_score(average=None): the sum over distinct thresholds of
    (R_n - R_{n-1}) * P_n, i.e. the mean over positive images of the precision at their score's threshold.
    A class without a positive image is NaN (scikit-learn warns and gives 0): it has no recall to average over."""
    _, hits, true_positives, predicted = _ranked(scores, targets)
    return (hits * true_positives / predicted).sum(0) / hits.sum(0)


def fit_thresholds(scores: torch.Tensor, targets: torch.Tensor, default: float = 0.5) -> torch.Tensor:
    """Per class, a threshold of the probabilities `scores` that maximises the F1 of `scores >= threshold` (of equally
    good scores, the highest): halfway between that score and the next lower one (0 below the lowest), so that a
    probability computed another way (an exported file, another batch) lands on the same side of it. A class without
    a positive image has F1 0 at every threshold: it keeps `default`."""
    ranked, hits, true_positives, predicted = _ranked(scores, targets)
    f1 = 2 * true_positives / (predicted + hits.sum(0))
    # F1 is a ratio of whole numbers, so equal F1s are equal floats; argmax takes the first, scores run high to low
    best = f1.argmax(0, keepdim=True)
    below = predicted.gather(0, best).long()  # the position of the next lower score: after every one predicted
    lower = torch.cat([ranked, torch.zeros_like(ranked[:1])]).gather(0, below)
    thresholds = ((ranked.gather(0, best) + lower) / 2).squeeze(0)
    return torch.where(hits.sum(0) > 0, thresholds, torch.full_like(thresholds, default))


def _ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, 0 where the denominator is 0: scikit-learn's zero_division=0."""
    return torch.where(denominator > 0, numerator / denominator.clamp_min(1), 0.0)


def _counts(scores: torch.Tensor, targets: torch.Tensor, thresholds: torch.Tensor | float) -> tuple[torch.Tensor, ...]:
    """True positives, predicted and actual positives per cell, as float64 [images, classes]."""
    # a float stays a Python number: compared in the scores' dtype, as `scores >= 0.3` is in torch and NumPy
    predicted = scores >= (thresholds.to(scores.device) if isinstance(thresholds, torch.Tensor) else thresholds)
    actual = targets.bool()
    return (predicted & actual).double(), predicted.double(), actual.double()


def _figures(
    true_positives: torch.Tensor, predicted: torch.Tensor, actual: torch.Tensor, dim: int | None
) -> dict[str, torch.Tensor]:
    """Precision, recall and F1 of counts summed over `dim` (None: over everything, the micro average)."""
    tp, pred, act = (x.sum() if dim is None else x.sum(dim) for x in (true_positives, predicted, actual))
    return {"precision": _ratio(tp, pred), "recall": _ratio(tp, act), "f1": _ratio(2 * tp, pred + act)}


def multi_label_metrics(
    scores: torch.Tensor, targets: torch.Tensor, thresholds: torch.Tensor | float
) -> dict[str, float]:
    """mAP (over the classes with a positive image) and the figures of the predictions `scores >= thresholds`.
    A sample with no true and no predicted label has F1 0 in f1_samples, as in scikit-learn with zero_division=0."""
    counts = _counts(scores, targets, thresholds)
    per_class, per_sample, micro = _figures(*counts, dim=0), _figures(*counts, dim=1), _figures(*counts, dim=None)
    true_positives, predicted, actual = counts
    wrong = predicted + actual - 2 * true_positives  # 1 where prediction and target differ
    return {
        "map": float(average_precision(scores, targets).nanmean()),
        "f1_micro": float(micro["f1"]),
        "f1_macro": float(per_class["f1"].mean()),
        "f1_samples": float(per_sample["f1"].mean()),
        "precision_micro": float(micro["precision"]),
        "precision_macro": float(per_class["precision"].mean()),
        "recall_micro": float(micro["recall"]),
        "recall_macro": float(per_class["recall"].mean()),
        "exact_match": float((wrong.sum(1) == 0).double().mean()),
        "hamming_loss": float(wrong.mean()),
    }


def per_class_report(
    scores: torch.Tensor, targets: torch.Tensor, thresholds: torch.Tensor | float, classes: list[str]
) -> list[dict]:
    """AP, precision, recall, F1, threshold and support (positive images) per class, then the micro, macro and
    samples averages. Their ap: micro the AP of all cells pooled (scikit-learn's average="micro"), macro the mAP,
    samples none; their threshold is none, their support all positive labels."""
    if len(classes) != scores.shape[1]:
        raise ValueError(f"{len(classes)} class names for {scores.shape[1]} classes")
    ap, counts = average_precision(scores, targets), _counts(scores, targets, thresholds)
    per_class, support = _figures(*counts, dim=0), counts[2].sum(0)
    columns = {key: value.tolist() for key, value in {"ap": ap, **per_class, "support": support.long()}.items()}
    columns["threshold"] = torch.as_tensor(thresholds, dtype=torch.float64).expand(len(classes)).tolist()
    order = ("ap", "precision", "recall", "f1", "threshold", "support")
    rows = [{"class": name} | {key: columns[key][index] for key in order} for index, name in enumerate(classes)]
    micro_ap = float(average_precision(scores.reshape(-1, 1), targets.reshape(-1, 1)))
    averages = {
        "micro avg": (micro_ap, _figures(*counts, dim=None)),
        "macro avg": (float(ap.nanmean()), {key: value.mean() for key, value in per_class.items()}),
        "samples avg": (None, {key: value.mean() for key, value in _figures(*counts, dim=1).items()}),
    }
    for label, (average_ap, figures) in averages.items():
        floats = {key: float(value) for key, value in figures.items()}
        rows.append({"class": label, "ap": average_ap, **floats, "threshold": None, "support": int(support.sum())})
    return rows


CURVE_POINTS = 101  # per class in precision_recall.csv: enough to draw the curve, few for any validation set


def precision_recall_points(scores: torch.Tensor, targets: torch.Tensor, classes: list[str]) -> list[dict]:
    """Each class's precision and recall at its distinct scores as thresholds, high to low (at most CURVE_POINTS of
    them, evenly spread): the points of scikit-learn's precision_recall_curve. Classes without a positive: none."""
    ranked, hits, true_positives, predicted = _ranked(scores, targets)
    rows = []
    for column, name in enumerate(classes):
        positives = hits[:, column].sum()
        if not positives:
            continue
        last = torch.tensor([len(scores) - 1], device=ranked.device)
        ends = torch.cat([(ranked[1:, column] != ranked[:-1, column]).nonzero().flatten(), last])  # each score's last
        picked = torch.linspace(0, len(ends) - 1, min(len(ends), CURVE_POINTS)).round().long()
        for index in ends[picked].tolist():
            found = true_positives[index, column]
            recall, precision = float(found / positives), float(found / predicted[index, column])
            threshold = float(ranked[index, column])
            rows.append({"class": name, "threshold": threshold, "precision": precision, "recall": recall})
    return rows


def write_reports(
    out: Path, scores: torch.Tensor, targets: torch.Tensor, thresholds: torch.Tensor | float, classes: list[str]
) -> None:
    """per_class.csv of one evaluation (the blank cells of the average rows are empty) and precision_recall.csv, the
    points of each class's curve that plots draw."""
    write_csv(out / "per_class.csv", per_class_report(scores, targets, thresholds, classes))
    points = precision_recall_points(scores, targets, classes)
    if points:
        write_csv(out / "precision_recall.csv", points)
    else:  # no validation image has a label: no curve, and none of an earlier epoch's
        (out / "precision_recall.csv").unlink(missing_ok=True)
{% endif %}

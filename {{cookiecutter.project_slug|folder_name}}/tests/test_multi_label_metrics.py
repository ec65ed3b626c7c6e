{% if cookiecutter.task == "multi_label" %}
"""The multi-label figures against scikit-learn on an asymmetric case, by hand on a tiny one, and as CSV."""

import csv
import math

import numpy as np
import pytest
import torch
from sklearn import metrics as sklearn_metrics

from {{ cookiecutter.package_name }}.reports.multi_label import (
    average_precision,
    fit_thresholds,
    multi_label_metrics,
    per_class_report,
    write_reports,
)


def asymmetric_case():
    """Classes from common to never present, scores rounded to a tenth so that many tie, and image 0 with no label,
    true or predicted (F1 0/0). Class 4 has no positive image but is still predicted, so its precision is 0 of some."""
    generator = torch.Generator().manual_seed(7)
    frequencies = torch.tensor([0.7, 0.4, 0.15, 0.05, 0.0])
    targets = (torch.rand(60, 5, generator=generator) < frequencies).long()
    targets[0] = 0
    targets[1, 3] = 1  # at least one positive for the rare class
    noise = torch.rand(60, 5, generator=generator, dtype=torch.float64)
    scores = ((0.5 * targets + noise) / 1.5).mul(10).round().div(10)
    scores[0] = 0.0
    thresholds = torch.tensor([0.5, 0.4, 0.6, 0.3, 0.7], dtype=torch.float64)
    return scores, targets, thresholds


def sklearn_figures(scores, targets, thresholds):
    """Every figure of multi_label_metrics but the mAP, from scikit-learn."""
    y, predicted = targets.numpy(), (scores >= thresholds).numpy()
    expected = {
        "f1_samples": sklearn_metrics.f1_score(y, predicted, average="samples", zero_division=0),
        "exact_match": sklearn_metrics.accuracy_score(y, predicted),
        "hamming_loss": sklearn_metrics.hamming_loss(y, predicted),
    }
    scorers = {"f1": sklearn_metrics.f1_score, "precision": sklearn_metrics.precision_score}
    for name, score in {**scorers, "recall": sklearn_metrics.recall_score}.items():
        for average in ("micro", "macro"):
            expected[f"{name}_{average}"] = score(y, predicted, average=average, zero_division=0)
    return expected


def test_average_precision_equals_scikit_learns_and_is_nan_without_positives():
    scores, targets, _ = asymmetric_case()
    assert len(scores.unique()) < 12 and targets[:, 4].sum() == 0 and (scores[:, 4] >= 0.7).any()
    ap = average_precision(scores, targets)
    assert ap.dtype == torch.float64 and math.isnan(ap[4])
    with pytest.warns(UserWarning):  # scikit-learn's 0 for the class without positives, which is not ours
        expected = sklearn_metrics.average_precision_score(targets.numpy(), scores.numpy(), average=None)
    assert ap[:4].tolist() == pytest.approx(expected[:4], abs=1e-9)


def test_average_precision_by_hand_with_a_tie_across_a_positive_and_a_negative():
    # thresholds 0.9: 1 of 1 right, R = 1/2; 0.5 (a positive and a negative): 2 of 3 right, R = 1; 0.1: adds nothing
    scores = torch.tensor([[0.9], [0.5], [0.5], [0.1]])
    targets = torch.tensor([[1], [0], [1], [0]])
    assert average_precision(scores, targets).item() == pytest.approx(0.5 * 1 + 0.5 * 2 / 3, abs=1e-12)


def test_the_metrics_equal_scikit_learns_with_per_class_thresholds():
    scores, targets, thresholds = asymmetric_case()
    figures = multi_label_metrics(scores, targets, thresholds)
    expected = sklearn_figures(scores, targets, thresholds)
    # the mean over the classes with a positive image, the first four
    expected["map"] = sklearn_metrics.average_precision_score(targets[:, :4].numpy(), scores[:, :4].numpy())
    assert figures == pytest.approx(expected, abs=1e-9)  # approx of a dict: the same keys too
    assert 0 < figures["exact_match"] < 1 and figures["f1_micro"] != figures["f1_macro"] != figures["f1_samples"]


def test_a_single_float_threshold_is_the_same_for_every_class():
    scores, targets, _ = asymmetric_case()
    figures = multi_label_metrics(scores, targets, 0.4)
    assert figures == multi_label_metrics(scores, targets, torch.full((5,), 0.4, dtype=torch.float64))
    del figures["map"]
    assert figures == pytest.approx(sklearn_figures(scores, targets, 0.4), abs=1e-9)
    rows = per_class_report(scores, targets, 0.4, list("abcde"))
    assert [row["threshold"] for row in rows] == [0.4] * 5 + [None] * 3


def test_fitted_thresholds_are_the_best_scores_by_brute_force_and_the_highest_of_equals():
    scores, targets, _ = asymmetric_case()
    fitted = fit_thresholds(scores, targets)
    for column in range(4):
        y, candidates = targets[:, column].numpy(), sorted(set(scores[:, column].tolist()), reverse=True)
        f1 = [sklearn_metrics.f1_score(y, scores[:, column].numpy() >= t, zero_division=0) for t in candidates]
        best = int(np.argmax(f1))  # the first, so the highest, of equals; the threshold halfway to the next lower
        assert fitted[column].item() == pytest.approx((candidates[best] + [*candidates, 0.0][best + 1]) / 2)
    assert fitted[4].item() == 0.5  # no positive image: the default is kept
    # F1 = 2/3 both at 0.8 (1 predicted, 1 of 2 found) and at 0.6 (4 predicted, 2 of 2 found): the higher wins
    tie = fit_thresholds(torch.tensor([[0.8], [0.7], [0.6], [0.6], [0.1]]), torch.tensor([[1], [0], [1], [0], [0]]))
    assert tie.item() == pytest.approx(0.75)  # halfway between 0.8 and the next lower score


def test_per_class_rows_and_averages_equal_scikit_learns_and_the_csv_reads_back(tmp_path):
    scores, targets, thresholds = asymmetric_case()
    classes = ["cat", "dog", "a, b", "rare", "absent"]
    rows = {row["class"]: row for row in per_class_report(scores, targets, thresholds, classes)}
    assert list(rows) == [*classes, "micro avg", "macro avg", "samples avg"]
    y, predicted = targets.numpy(), (scores >= thresholds).numpy()
    averages = {average: [f"{average} avg"] for average in ("micro", "macro", "samples")}
    for average, names in ((None, classes), *averages.items()):
        figures = sklearn_metrics.precision_recall_fscore_support(y, predicted, average=average, zero_division=0)
        for key, values in zip(("precision", "recall", "f1"), figures[:3], strict=False):
            assert [rows[name][key] for name in names] == pytest.approx(np.atleast_1d(values), abs=1e-9), (average, key)
    assert [rows[name]["support"] for name in classes] == targets.sum(0).tolist()
    assert [rows[name]["threshold"] for name in classes] == thresholds.tolist()
    micro_ap = sklearn_metrics.average_precision_score(y, scores.numpy(), average="micro")
    assert rows["micro avg"]["ap"] == pytest.approx(micro_ap, abs=1e-9)
    assert rows["macro avg"]["ap"] == pytest.approx(multi_label_metrics(scores, targets, thresholds)["map"], abs=1e-12)
    write_reports(tmp_path, scores, targets, thresholds, classes)
    with open(tmp_path / "per_class.csv", newline="") as file:
        written = list(csv.DictReader(file))
    assert list(written[0]) == ["class", "ap", "precision", "recall", "f1", "threshold", "support"]
    assert written == [
        {key: "" if value is None else str(value) for key, value in row.items()} for row in rows.values()
    ]
    assert written[4]["ap"] == "nan" and written[-1]["ap"] == written[-1]["threshold"] == ""  # blank, not "None"


def test_a_class_list_that_does_not_fit_the_scores_is_an_error():
    scores, targets, thresholds = asymmetric_case()
    for classes in (list("abcd"), list("abcdef")):
        with pytest.raises(ValueError):
            per_class_report(scores, targets, thresholds, classes)
{% endif %}

{% if cookiecutter.task != "multi_label" %}
"""The confusion-matrix figures computed by hand on small matrices, and the CSVs they are written to."""

import pytest
import torch

from {{ cookiecutter.package_name }}.reports.metrics import (
    confusion_matrix,
    per_class_report,
    write_confusion_csv,
    write_reports,
)


def test_per_class_figures_and_their_averages_match_a_hand_computation():
    matrix = torch.tensor([[1, 3], [1, 0]])  # class a: P = 1/2, R = 1/4, so P + R < 1; class b: never right
    rows = {row["class"]: row for row in per_class_report(matrix, ["a", "b"])}
    assert rows["a"] == pytest.approx({"class": "a", "precision": 0.5, "recall": 0.25, "f1": 1 / 3, "support": 4})
    assert rows["b"] == {"class": "b", "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}  # 0/0: 0, not NaN
    micro = {"class": "micro avg", "precision": 0.2, "recall": 0.2, "f1": 0.2, "support": 5}
    assert rows["micro avg"] == pytest.approx(micro)
    macro = {"class": "macro avg", "precision": 0.25, "recall": 0.125, "f1": 1 / 6, "support": 5}
    assert rows["macro avg"] == pytest.approx(macro)
    weighted = {"class": "weighted avg", "precision": 0.4, "recall": 0.2, "f1": 4 / 15, "support": 5}
    assert rows["weighted avg"] == pytest.approx(weighted)
    assert list(rows) == ["a", "b", "micro avg", "macro avg", "weighted avg"]


def test_a_single_correct_sample_scores_one_everywhere():
    rows = per_class_report(torch.tensor([[0, 0], [0, 1]]), ["a", "b"])
    micro = next(row for row in rows if row["class"] == "micro avg")
    assert micro == {"class": "micro avg", "precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    assert rows[1]["f1"] == 1.0 and rows[0]["f1"] == 0.0


def test_a_class_list_that_does_not_fit_the_matrix_is_an_error_not_a_truncated_report(tmp_path):
    matrix = torch.tensor([[2, 0, 0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(ValueError):
        per_class_report(matrix, ["a", "b"])
    with pytest.raises(ValueError):
        write_confusion_csv(tmp_path / "confusion_matrix.csv", matrix, ["a", "b"])
    with pytest.raises(ValueError):
        write_confusion_csv(tmp_path / "confusion_matrix.csv", matrix[:2], ["a", "b", "c"])


def test_the_reports_are_written_as_plain_csv(tmp_path):
    matrix = confusion_matrix(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1, 1, 2]), 3)
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    write_reports(tmp_path, matrix, ["cat", "dog", "a, b"])
    confusion = (tmp_path / "confusion_matrix.csv").read_text()
    assert confusion == 'true \\ predicted,cat,dog,"a, b"\ncat,1,1,0\ndog,0,1,0\n"a, b",0,0,1\n'
    lines = (tmp_path / "per_class.csv").read_text().splitlines()
    assert lines[0] == "class,precision,recall,f1,support" and lines[1] == "cat,1.0,0.5,0.6666666666666666,2"
    assert [line.split(",")[0] for line in lines[4:]] == ["micro avg", "macro avg", "weighted avg"]


def test_the_report_csvs_end_lines_in_a_plain_line_feed_and_refuse_ragged_rows(tmp_path):
    write_reports(tmp_path, torch.tensor([[1, 0], [0, 1]]), ["a", "b"])
    assert b"\r" not in (tmp_path / "per_class.csv").read_bytes()
    assert (tmp_path / "confusion_matrix.csv").read_bytes() == b"true \\ predicted,a,b\na,1,0\nb,0,1\n"
    with pytest.raises(ValueError):  # as many rows as classes, but each row one column too many
        write_confusion_csv(tmp_path / "ragged.csv", torch.zeros(2, 3, dtype=torch.long), ["a", "b"])
{% endif %}

import csv
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image
{% if cookiecutter.task != "multi_label" %}
from sklearn import metrics as sklearn_metrics
{% endif %}

from {{ cookiecutter.package_name }}.cli import main
{% if cookiecutter.task != "multi_label" %}
from {{ cookiecutter.package_name }}.reports.metrics import (
    confusion_matrix,
    per_class_report,
    write_confusion_csv,
)
{% endif %}
{% if cookiecutter.task == "multi_label" %}
from {{ cookiecutter.package_name }}.reports.plots import learning_curves, precision_recall_figure, save
{% else %}
from {{ cookiecutter.package_name }}.reports.plots import confusion_figure, learning_curves, save
{% endif %}
from {{ cookiecutter.package_name }}.training.train import train


def read_csv(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def assert_picture(path, size):
    """A PNG of about the expected size with real content (many colours, not one flat background), drawn whole:
    a white margin on every side, so no label runs off the edge."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert all(0.8 * want <= got <= 1.2 * want for got, want in zip(image.size, size, strict=True))
        pixels = np.asarray(image.convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50
    assert (pixels != 255).any(axis=2).mean() > 0.02  # more than a white page with a frame
    for edge in (pixels[:2], pixels[-2:], pixels[:, :2], pixels[:, -2:]):
        assert (edge == 255).all(), f"{path.name}: something is cut off at the edge"


def test_learning_curves_count_epochs_in_whole_numbers():
    for epochs in ((1, 2, 3), (1,)):  # one epoch too: no 0.95 ... 1.05 ticks
        rows = [{"epoch": str(e), "train_loss": "1", "val_loss": "1", "val_acc": "0.5", "lr": "0.1"} for e in epochs]
        figure = learning_curves(rows)
        assert all(tick == int(tick) for axis in figure.axes for tick in axis.get_xticks())
        assert all(1 in axis.get_xticks() for axis in figure.axes)


def test_class_names_are_drawn_as_text_not_as_math(tmp_path):
    classes = ["price $\\notacommand$", "50% off", "a_b^c"]  # "$...$" would be parsed as TeX-like math
{% if cookiecutter.task == "multi_label" %}
    save(precision_recall_figure({name: ([0.5, 1.0], [1.0, 0.5]) for name in classes}), tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
{% else %}
    save(confusion_figure([[1, 0, 0], [0, 1, 0], [0, 0, 1]], classes), tmp_path / "confusion.png")
    assert_picture(tmp_path / "confusion.png", (500, 400))
{% endif %}
{% if cookiecutter.task != "multi_label" %}


def test_per_class_report_matches_counting_by_hand():
    generator = torch.Generator().manual_seed(0)
    targets = torch.randint(0, 5, (500,), generator=generator)
    predictions = torch.where(torch.rand(500, generator=generator) < 0.6, targets, torch.randint(0, 5, (500,)))
    matrix = confusion_matrix(targets, predictions, 5)
    rows = {row["class"]: row for row in per_class_report(matrix, list("abcde"))}
    for index, name in enumerate("abcde"):
        hits = int(((predictions == index) & (targets == index)).sum())
        assert rows[name]["precision"] == pytest.approx(hits / int((predictions == index).sum()))
        assert rows[name]["recall"] == pytest.approx(hits / int((targets == index).sum()))
        assert rows[name]["support"] == int((targets == index).sum())
    accuracy = float((predictions == targets).float().mean())
    assert rows["micro avg"]["f1"] == pytest.approx(accuracy) and rows["micro avg"]["support"] == 500
    assert rows["macro avg"]["f1"] == pytest.approx(np.mean([rows[name]["f1"] for name in "abcde"]))
    assert rows["weighted avg"]["recall"] == pytest.approx(accuracy)
{% endif %}
{% if cookiecutter.task != "multi_label" %}


def test_report_and_confusion_csv_equal_scikit_learns_on_an_asymmetric_case(tmp_path):
    """Against an independent reference: class b is over-predicted and class d never, so precision, recall and F1
    differ per class, and a transposed matrix or F1 as the mean of precision and recall would show."""
    generator = torch.Generator().manual_seed(3)
    targets = torch.randint(0, 4, (300,), generator=generator)
    predictions = torch.where(torch.rand(300, generator=generator) < 0.6, targets, 1)
    predictions[predictions == 3] = 2
    matrix, classes = confusion_matrix(targets, predictions, 4), list("abcd")
    expected = sklearn_metrics.confusion_matrix(targets.numpy(), predictions.numpy(), labels=range(4))
    assert matrix.tolist() == expected.tolist()
    rows = {row["class"]: row for row in per_class_report(matrix, classes)}
    averages = {"micro": ["micro avg"], "macro": ["macro avg"], "weighted": ["weighted avg"]}
    for average, names in ((None, classes), *averages.items()):
        figures = sklearn_metrics.precision_recall_fscore_support(
            targets.numpy(), predictions.numpy(), labels=range(4), average=average, zero_division=0
        )
        for key, values in zip(("precision", "recall", "f1"), figures[:3], strict=False):
            assert [rows[name][key] for name in names] == pytest.approx(np.atleast_1d(values), abs=1e-9), (average, key)
    write_confusion_csv(tmp_path / "confusion.csv", matrix, classes)
    written = read_csv(tmp_path / "confusion.csv")
    assert [row["true \\ predicted"] for row in written] == classes  # rows: the true class
    assert [[int(row[name]) for name in classes] for row in written] == expected.tolist()
{% endif %}
{% if cookiecutter.task != "multi_label" %}


def test_every_epoch_writes_the_report_and_the_run_ends_with_pictures(tiny_config, tmp_path):
    result = train(replace(tiny_config, epochs=2, plots=True))
    run = tmp_path / "run"
    matrix = [[int(count) for count in list(row.values())[1:]] for row in read_csv(run / "confusion_matrix.csv")]
    report = {row["class"]: row for row in read_csv(run / "per_class.csv")}
    evaluated = sum(map(sum, matrix))
    assert evaluated == int(report["micro avg"]["support"]) == 2 * tiny_config.batch_size
    assert float(report["micro avg"]["f1"]) == pytest.approx(result["metrics"][-1]["val_acc"])
    classes = (run / "classes.txt").read_text().splitlines()
    assert sum(int(report[name]["support"]) for name in classes) == evaluated
    assert_picture(run / "learning_curves.png", (1500, 400))
    assert_picture(run / "confusion_matrix.png", (800, 700))
{% endif %}


def test_plot_redraws_a_run_and_refuses_a_folder_without_one(tiny_config, tmp_path, capsys):
    train(tiny_config)  # with plots=False
    run = tmp_path / "run"
    assert not (run / "learning_curves.png").exists()
    assert main(["plot", str(run)]) == 0
    assert_picture(run / "learning_curves.png", (1500, 400))
    assert main(["plot", str(tmp_path)]) == 2
    message = capsys.readouterr().err.strip()
    assert message.endswith(f"has no metrics.csv or {SECOND}; pass the output dir of a run")


GOOD_METRICS = "epoch,train_loss,val_loss,val_acc,lr\n1,0.9,0.8,0.5,0.1\n2,0.7,0.6,0.6,0.05\n"
{% if cookiecutter.task == "multi_label" %}
SECOND, GOOD_SECOND = "precision_recall.csv", "class,threshold,precision,recall\na,0.9,1.0,0.5\na,0.2,0.5,1.0\n"
{% else %}
SECOND, GOOD_SECOND = "confusion_matrix.csv", "true \\ predicted,a,b\na,3,1\nb,0,4\n"
GOOD_CONFUSION = GOOD_SECOND
{% endif %}
HUGE = "99999999999999999999999999"  # beyond int64: matplotlib's TypeError (dtype object) once


@pytest.mark.parametrize(
    ("name", "content", "wrong"),
    [
        ("metrics.csv", "step,foo,bar\n1,2,3\n", "is not a metrics.csv written by train (no 'epoch' column)"),
        ("metrics.csv", "", "holds no epochs (empty or a header alone)"),
        ("metrics.csv", GOOD_METRICS.splitlines()[0], "holds no epochs (empty or a header alone)"),
        ("metrics.csv", "epoch,val_loss\n1,0.5\n", "(no accuracy or learning rate column)"),
        ("metrics.csv", GOOD_METRICS.replace("0.6,0.6", "0.6,abc"), ": 'val_acc' in row 2 is 'abc', not a number"),
        ("metrics.csv", GOOD_METRICS + "3,0.5\n", ": 'val_loss' in row 3 is '', not a number"),  # a short row
        ("metrics.csv", GOOD_METRICS + "3,1,1,1,1,1\n", ": row 3 has more values than the header has columns"),
        ("metrics.csv", b"epoch,\xff\n", "cannot read"),  # not UTF-8
        ("metrics.csv", GOOD_METRICS.replace("\n2,", "\n1,"), ": 'epoch' in row 2 is 1, not 2"),  # repeated
        ("metrics.csv", GOOD_METRICS.replace("\n1,", "\n-1,"), ": 'epoch' in row 1 is -1, not 1"),
        ("metrics.csv", GOOD_METRICS.replace("\n1,", "\n0,"), ": 'epoch' in row 1 is 0, not 1"),
        ("metrics.csv", "epoch,lr,val_acc,lr\n1,1,1,1\n", ": the header names 'lr' more than once"),
{% if cookiecutter.task == "multi_label" %}
        ("precision_recall.csv", "", "is not a precision_recall.csv written by train"),
        ("precision_recall.csv", "class,x\na,1\n", "is not a precision_recall.csv written by train"),
        ("precision_recall.csv", GOOD_SECOND.replace("0.5,1.0", "0.5,x"), ": 'recall' in row 2 is 'x', not a number"),
        ("precision_recall.csv", GOOD_SECOND.replace("1.0,0.5", "1.5,0.5"), ": row 1 has a precision or recall"),
    ],
    ids=["other-columns", "empty", "header-only", "some-columns", "text", "short-row", "long-row", "not-utf8"]
    + ["repeated-epoch", "negative-epoch", "epoch-0", "repeated-column", "empty-curves", "other-curve-columns"]
    + ["text-in-curves", "precision-above-1"],
{% else %}
        ("confusion_matrix.csv", "", "is not a confusion_matrix.csv written by train (0 row(s) and 0 column(s)"),
        ("confusion_matrix.csv", "garbage\nmore garbage\n", "(1 row(s) and 0 column(s) of counts, not square)"),
        ("confusion_matrix.csv", GOOD_CONFUSION.replace("0,4", "0,x"), ": 'b' in row 2 is 'x', not a number"),
        ("confusion_matrix.csv", GOOD_CONFUSION.replace("0,4", f"0,{HUGE}"), f": 'b' in row 2 is {HUGE}, not a count"),
        ("confusion_matrix.csv", GOOD_CONFUSION.replace("b,0", f"b,{2**63}"), f": 'a' in row 2 is {2**63}, not a"),
        ("confusion_matrix.csv", "x,a\na,-1\n", ": 'a' in row 1 is -1, not a count from 0 to 2**63 - 1"),
        ("confusion_matrix.csv", "x,a,b\nb,3,1\na,0,4\n", ": row 1 is class 'b', but column 1 of counts is 'a'"),
        ("confusion_matrix.csv", "x,a,b\na,3,1\na,0,4\n", ": row 2 is class 'a' again, but column 2 of counts is 'b'"),
        ("confusion_matrix.csv", "x,a,a\na,3,1\na,0,4\n", ": the header names 'a' more than once"),
    ],
    ids=["other-columns", "empty", "header-only", "some-columns", "text", "short-row", "long-row", "not-utf8"]
    + ["repeated-epoch", "negative-epoch", "epoch-0", "repeated-column", "empty-matrix", "garbage-matrix"]
    + ["text-in-matrix", "huge-count"]
    + ["count-2-63", "negative-count", "rows-disagree", "repeated-row-class", "repeated-class"],
{% endif %}
)
def test_plot_names_a_malformed_csv_in_one_line_and_draws_nothing(tmp_path, capsys, name, content, wrong):
    """Whichever file is wrong, the other one's picture is not drawn either: the folder is left as it was. (A bad
    GOOD_METRICS would be named in the other file's cases, a bad GOOD_SECOND would not say what they expect.)"""
    good = {"metrics.csv": GOOD_METRICS, SECOND: GOOD_SECOND}
    for file, text in (good | {name: content}).items():
        (tmp_path / file).write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["plot", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and str(tmp_path / name) in err, err
    assert wrong in err and err.rstrip().endswith("; plot reads the folder of a training run"), err
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(good)
{% if cookiecutter.task != "multi_label" %}


def test_plot_reads_csvs_saved_with_a_byte_order_mark_and_counts_up_to_2_63(tmp_path):
    """As Excel saves a CSV: a BOM before the header, which must not become part of the 'epoch' column's name."""
    confusion = GOOD_CONFUSION.replace("a,3", f"a,{2**63 - 1}")  # the largest count drawn, 0 the smallest
    (tmp_path / "metrics.csv").write_bytes(b"\xef\xbb\xbf" + GOOD_METRICS.encode())
    (tmp_path / "confusion_matrix.csv").write_bytes(b"\xef\xbb\xbf" + confusion.encode())
    assert main(["plot", str(tmp_path)]) == 0
    assert_picture(tmp_path / "learning_curves.png", (1500, 400))
    assert (tmp_path / "confusion_matrix.png").stat().st_size > 0
{% endif %}


def test_each_evaluated_path_gets_its_own_evaluation_folder_beside_the_weights(tmp_path):
    import hashlib
    import os
    from pathlib import Path

    from {{ cookiecutter.package_name }}.serving.inference import default_evaluation_dir

    weights = str(tmp_path / "run" / "model.pt")
    first = default_evaluation_dir(weights, str(tmp_path / "a" / "test"), tta=False)
    second = default_evaluation_dir(weights, str(tmp_path / "b" / "test"), tta=False)
    digest = hashlib.sha1(str(tmp_path / "a" / "test").encode()).hexdigest()[:6]
    assert first == tmp_path / "run" / f"eval-model-test-{digest}" and second.name.startswith("eval-model-test-")
    assert first != second
    mirrored = default_evaluation_dir(weights, str(tmp_path / "a" / "test"), tta=True)
    assert mirrored.name == f"eval-model-test-{digest}-tta"
    odd = os.fsdecode(b"caf\xe9 photos")  # bytes that are no UTF-8: a surrogate escape
    folder = default_evaluation_dir(weights, str(tmp_path / odd), tta=False)
    assert folder.parent == Path(weights).parent and folder.name.startswith("eval-model-caf_photos-")
    upper = default_evaluation_dir(weights, str(tmp_path / "Photos 2"), tta=False)
    assert upper.name.startswith("eval-model-Photos_2-")


def test_a_missing_or_imageless_path_to_predict_on_is_named(tmp_path):
    from {{ cookiecutter.package_name }}.core.errors import DataError
    from {{ cookiecutter.package_name }}.serving.predictions import image_files

    with pytest.raises(DataError) as raised:
        image_files([str(tmp_path / "nowhere.png")])
    assert str(raised.value) == f"{tmp_path / 'nowhere.png'}: no such file or folder"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as raised:
        image_files([str(tmp_path / "empty")])
    assert str(raised.value) == f"no images in {tmp_path / 'empty'}"


def test_predicting_on_several_folders_takes_the_images_of_each(tmp_path):
    from {{ cookiecutter.package_name }}.serving.predictions import image_files

    for name in ("one/b.png", "one/a.png", "two/c.jpg", "two/notes.txt", "three.png"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = image_files([str(tmp_path / "one"), str(tmp_path / "two"), str(tmp_path / "three.png")])
    assert found == [tmp_path / "one" / "a.png", tmp_path / "one" / "b.png", tmp_path / "two" / "c.jpg", found[-1]]
    assert found[-1] == tmp_path / "three.png"
{% if cookiecutter.task != "multi_label" %}


def test_evaluate_uses_the_class_names_the_weights_carry_and_warns_when_classes_txt_differs(tiny_config, capsys):
    from {{ cookiecutter.package_name }}.serving.inference import evaluate_run

    train(tiny_config)
    run = tiny_config.output_dir
    listed = open(f"{run}/classes.txt", encoding="utf-8").read().splitlines()
    with open(f"{run}/classes.txt", "w", encoding="utf-8") as file:
        file.write("\n".join(["renamed", *listed[1:]]) + "\n")
    capsys.readouterr()
    stats = evaluate_run(f"{run}/model.pt", torch.device("cpu"), output_dir=f"{run}/report")
    captured = capsys.readouterr()
    warning = f"warning: {run}/model.pt names other classes than the run's classes.txt; using the weights'"
    assert captured.err.splitlines() == [warning]
    accuracy, images = stats["val_acc"], int(stats["confusion"].sum())
    last_line = f"accuracy {accuracy:.4f} on {images} images; report: {run}/report/per_class.csv"
    assert captured.out.splitlines()[-1] == last_line
    assert [row["class"] for row in read_csv(f"{run}/report/per_class.csv")][: len(listed)] == listed
{% endif %}


def test_evaluate_refuses_what_does_not_fit_the_run_in_one_line_each(tiny_config, tmp_path, image_folder):
    from {{ cookiecutter.package_name }}.core.errors import UserError
    from {{ cookiecutter.package_name }}.serving.inference import evaluate_run
    from {{ cookiecutter.package_name }}.serving.predictions import image_files

    cpu = torch.device("cpu")
    train(replace(tiny_config, hflip=False))
    run = tmp_path / "run"
    with pytest.raises(UserError) as raised:
        evaluate_run(str(run / "model.pt"), cpu, tta=True)
    message = "--tta averages over mirror images, but this run was trained with --no-hflip: drop --tta"
    assert str(raised.value) == message
    with pytest.raises(UserError) as raised:
        evaluate_run(str(run / "model.pt"), cpu, data=str(image_folder))
    classes = (run / "classes.txt").read_text(encoding="utf-8").splitlines()
    assert str(raised.value) == f"{image_folder} has classes ['cats', 'dogs'], the model was trained on {classes}"
    (run / "classes.txt").unlink()  # config.yaml alone is not enough
    with pytest.raises(UserError) as raised:
        evaluate_run(str(run / "model.pt"), cpu)
    assert str(raised.value) == f"{run} lacks config.yaml or classes.txt; pass weights from a training output dir"
    (tmp_path / "a").mkdir()
    (tmp_path / "B").mkdir()
    with pytest.raises(UserError) as raised:
        image_files([str(tmp_path / "a"), str(tmp_path / "B")])
    assert str(raised.value) == f"no images in {tmp_path / 'a'}, {tmp_path / 'B'}"


def test_an_evaluation_with_tta_gets_its_own_folder_named_after_the_data(tiny_config, tmp_path):
    from {{ cookiecutter.package_name }}.serving.inference import evaluate_run

    train(tiny_config)
    evaluate_run(str(tmp_path / "run" / "model.pt"), torch.device("cpu"), tta=True)
    assert [folder.name[:-11] for folder in (tmp_path / "run").glob("eval-*")] == ["eval-model-synthetic"]
    assert next((tmp_path / "run").glob("eval-*")).name.endswith("-tta")

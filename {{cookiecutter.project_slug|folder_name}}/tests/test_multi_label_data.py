{% if cookiecutter.task == "multi_label" %}
"""Multi-label data: both CSV forms, each refusal naming its line, split.csv, the stratified hold-out, the datasets."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }}.core.errors import DataError
from {{ cookiecutter.package_name }}.data.decoding import load_image
from {{ cookiecutter.package_name }}.data.multi_label import (
    SEPARATOR,
    MultiLabelFiles,
    SyntheticTags,
    _tags,
    classes_of,
    hold_out,
    read_csv,
    write_split,
)


def write_csv(tmp_path, text: str, images=("a.png", "b.png", "c.png")) -> Path:
    for name in images:
        (tmp_path / name).write_bytes(b"")
    path = tmp_path / "labels.csv"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path, root, need_split=False) -> str:
    with pytest.raises(DataError) as raised:
        read_csv(path, root, need_split=need_split)
    assert "\n" not in str(raised.value)
    return str(raised.value)


def tagged(count: int, seed: int, chances=(0.5, 0.3, 0.1, 0.04, 0.02)) -> list:
    """`count` unsplit rows tagged at random with classes a, b, ... of the given chances; some with no class."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(count):
        drawn = (torch.rand(len(chances), generator=generator) < torch.tensor(chances)).tolist()
        rows.append((f"{i}.png", SEPARATOR.join(name for name, on in zip("abcde", drawn, strict=False) if on), None))
    return rows


def parts(rows, name: str) -> list[str]:
    return [split for _, labels, split in rows if name in labels.split(SEPARATOR)]


def test_both_csv_forms_give_the_same_sorted_deduplicated_rows(tmp_path):
    names = write_csv(tmp_path, "path,labels,split\na.png, dog ;cat;dog,train\nb.png,,val\nc.png,cat,val\n")
    expected = [("a.png", "cat;dog", "train"), ("b.png", "", "val"), ("c.png", "cat", "val")]
    assert read_csv(names, tmp_path) == expected
    columns = write_csv(tmp_path, "path,dog,cat,split\na.png,1,1,train\nb.png,0,0,val\nc.png, 0 ,1,val\n")
    assert read_csv(columns, tmp_path, need_split=True) == expected
    assert classes_of(expected) == ["cat", "dog"]
    unsplit = write_csv(tmp_path, "path,labels,notes\na.png,cat,x\nb.png,,\n")  # other columns are ignored
    assert read_csv(unsplit, tmp_path) == [("a.png", "cat", None), ("b.png", "", None)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("path,labels\na.png,cat\nb.png,cat,dog\n", "line 3: more cells than columns; separate class names with ;"),
        ('path,labels\na.png,cat\nb.png,"cat,dog"\n', "line 3: labels 'cat,dog': separate class names with ;"),
        ("path,labels\na.png,cat|dog\n", "line 2: labels 'cat|dog': separate class names with ;"),
        ("path,labels\na.png,cat/dog\n", "line 2: labels 'cat/dog': separate class names with ;"),
        ("path,labels\na.png,cat\tdog\n", "line 2: labels 'cat\\tdog': separate class names with ;"),
        ("path,labels\na.png,cat;;dog\n", "line 2: labels 'cat;;dog' holds an empty class name; remove the extra ;"),
        ("path,labels\na.png,cat;\n", "line 2: labels 'cat;' holds an empty class name; remove the extra ;"),
        ("path,cat,dog\na.png,1,0\nb.png,1,yes\n", "line 3: dog is 'yes'; a class column holds 0 or 1"),
        ("path,cat,dog\na.png,2,0\n", "line 2: cat is '2'; a class column holds 0 or 1"),
        ("path,cat,dog\na.png,1\n", "line 2: dog is ''; a class column holds 0 or 1"),
        ("path,labels,split\na.png,cat,train\nb.png,cat,test\n", "line 3: split 'test' must be train or val"),
        ("path,labels\n,cat\n", "line 2: the path is empty; give the image's path or remove the row"),
        ("path,labels\nno.png,cat\n", "line 2: {root}/no.png does not exist; fix the path or remove the row"),
        ("path,labels\na.png,cat\n./a.png,dog\n", "lines 2 and 3 list ./a.png; list it once"),
        ("path,labels,split\na.png,cat,train\nb.png,dog,val\nc.png,dog,val\n", "line 3: class 'dog' is in no train"),
        ("labels\ncat\n", "lacks the column(s) path; its first line must name path,labels[,split] or path,<class>"),
        ("path,label\na.png,cat\n", "line 1: name a labels column (class names separated by ;) or one 0/1 column"),
        ("path\na.png\n", "line 1: name a labels column (class names separated by ;) or one 0/1 column per class"),
        ("path,cat,cat\na.png,1,1\n", "line 1: column 'cat' appears twice; name each column once"),
        ("path,cat,a/b\na.png,1,1\n", "line 1: class column 'a/b' must be named, without , ; | / or a tab; rename"),
        ("path,cat,\na.png,1,1\n", "line 1: class column '' must be named, without , ; | / or a tab; rename it"),
        ("path,labels\n", "lists no images; add rows of path,labels[,split] or path,<class>,<class>,...[,split]"),
    ],
)
def test_each_bad_csv_is_refused_in_one_line_naming_the_file_and_line(tmp_path, text, message):
    path = write_csv(tmp_path, text)
    assert refusal(path, tmp_path).startswith(f"{path} " + message.format(root=tmp_path))


def test_a_missing_csv_a_split_asked_for_and_an_image_linked_twice_are_refused(tmp_path):
    assert refusal(tmp_path / "none.csv", tmp_path).startswith(f"cannot read {tmp_path / 'none.csv'} ([Errno 2]")
    path = write_csv(tmp_path, "path,labels\na.png,cat\n")
    assert refusal(path, tmp_path, need_split=True).startswith(f"{path} lacks the column(s) split; ")
    (tmp_path / "link.png").symlink_to(tmp_path / "a.png")
    path = write_csv(tmp_path, "path,cat\na.png,1\nb.png,0\nlink.png,1\n")
    assert refusal(path, tmp_path) == f"{path} lines 2 and 4 list the same image as a.png and link.png; list it once"


def test_a_written_split_reads_back_as_it_was(tmp_path):
    rows = [("a.png", "cat;dog", "train"), ("b.png", "", "val"), ("c.png", "dog", "train"), ("d e.png", "cat", "val")]
    write_csv(tmp_path, "", images=[name for name, _, _ in rows])
    write_split(tmp_path / "split.csv", rows)
    assert (tmp_path / "split.csv").read_text().startswith("path,labels,split\na.png,cat;dog,train\nb.png,,val\n")
    assert read_csv(tmp_path / "split.csv", tmp_path, need_split=True) == rows


@pytest.mark.parametrize("seed", range(8))
def test_a_hold_out_puts_each_class_of_two_images_in_both_parts_near_the_fraction(seed):
    rows = tagged(400, seed) + [("f0.png", "f", None), ("f1.png", "b;f", None), ("g.png", "a;g", None)]
    split = hold_out(rows, 0.25, seed)
    assert [(path, labels) for path, labels, _ in split] == [(path, labels) for path, labels, _ in rows]
    for name in classes_of(rows):
        where = parts(split, name)
        if len(where) == 1:
            assert where == ["train"]  # in val alone it could never be learned
        else:
            assert "train" in where and "val" in where, name
        if len(where) >= 20:
            assert abs(where.count("val") / len(where) - 0.25) < 0.05, name
    assert parts(split, "f") in (["train", "val"], ["val", "train"]) and parts(split, "g") == ["train"]
    unlabelled = [split for _, labels, split in split if not labels]  # a class of their own: exactly the fraction
    assert len(unlabelled) > 50 and unlabelled.count("val") == round(0.25 * len(unlabelled))


@pytest.mark.parametrize("labels", [["b;c", "a", "a;b", "a;c"], ["a;b;c;d", "a;c", "b", "", "c;d", "c;d", "a;b;c"]])
def test_a_class_whose_images_are_placed_for_other_classes_still_gets_one_in_each_part(labels):
    """Placed for their rarer classes, one class's images can all land in one part: for most of these seeds without
    each class of two wanting one in val from the start (the first), or one moved afterwards (the second)."""
    rows = [(f"{i}.png", names, None) for i, names in enumerate(labels)]
    for seed in range(10):
        split = hold_out(rows, 0.25, seed)
        assert all(sorted(set(parts(split, name))) == ["train", "val"] for name in classes_of(rows)), seed


def test_a_hold_out_depends_on_its_seed_only(tmp_path):
    rows = tagged(200, 0)
    torch.manual_seed(1)
    first = hold_out(rows, 0.2, seed=3)
    torch.manual_seed(2)
    assert hold_out(rows, 0.2, seed=3) == first  # whatever the global random state
    assert hold_out(rows, 0.2, seed=4) != first
    images = write_csv(tmp_path, "", images=[name for name, _, _ in rows])
    write_split(images.with_name("split.csv"), first)  # a hold-out's split is one read_csv accepts
    assert read_csv(images.with_name("split.csv"), tmp_path, need_split=True) == first


def test_a_hold_out_is_the_same_under_any_python_hash_seed():
    """Python randomises the order of sets of strings per process: the split must not follow it."""
    script = (
        "from {{ cookiecutter.package_name }}.data.multi_label import hold_out\n"
        "rows = [(f'{i}.png', ';'.join(n for j, n in enumerate('abcdefgh') if (i >> j) % 3 == 0), None)"
        " for i in range(300)]\n"
        "print(hold_out(rows, 0.3, 5))"
    )
    package = Path({{ cookiecutter.package_name }}.__file__).parent.parent
    splits = [
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONPATH": str(package), "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for hash_seed in ("1", "2")
    ]
    assert splits[0] == splits[1] and "val" in splits[0]


def test_synthetic_tags_are_deterministic_from_the_seed_and_some_images_show_no_class():
    a = SyntheticTags(256, seed=1)
    _tags.cache_clear()  # drawn again, not the cached tensors
    b, c = SyntheticTags(256, seed=1), SyntheticTags(256, seed=2)
    assert torch.equal(a.images, b.images) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.images, c.images) and not torch.equal(a.targets, c.targets)
    assert a.images.dtype == torch.uint8 and a.images.shape == (256, 3, 32, 32)
    assert a.targets.dtype == torch.float32 and a.targets.shape == (256, len(a.classes)) and 4 <= len(a.classes) <= 6
    shown = a.targets.sum(1)
    assert set(a.targets.unique().tolist()) == {0.0, 1.0} and (shown == 0).sum() > 10 and (shown >= 2).sum() > 10
    assert (a.targets.mean(0) > 0.15).all()  # every class is common
    image, target = SyntheticTags(4, seed=0, size=31, transform=lambda image: image // 2)[1]
    assert image.shape == (3, 31, 31) and torch.equal(target, SyntheticTags(4, seed=0, size=31).targets[1])


def test_multi_label_files_give_images_and_multi_hot_targets(tmp_path):
    for name, colour in (("a.png", (200, 0, 0)), ("b.png", (0, 0, 200)), ("c.png", (0, 200, 0))):
        Image.new("RGB", (5, 4), colour).save(tmp_path / name)
    rows = [("a.png", "cat;dog", "train"), ("b.png", "", "train"), ("c.png", "owl", "train")]
    files = MultiLabelFiles(tmp_path, rows, ["cat", "dog", "owl"], load_image)
    assert len(files) == 3 and files.targets.dtype == torch.float32
    assert files.targets.tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 1]]
    assert files.samples[2][0] == str(tmp_path / "c.png")
    image, target = files[0]
    assert image.size == (5, 4) and image.getpixel((0, 0)) == (200, 0, 0) and target.tolist() == [1, 1, 0]
    target += 1  # a copy, not a view into every target
    assert files.targets[0].tolist() == [1, 1, 0]


def test_the_hold_out_leaves_every_class_an_image_to_train_on():
    """Two images place three classes: cat's one image also carries dog, which the stratification sends to val first.
    Over seeds and shares, no class ends without a training image (it could never be learnt)."""
    rows = [("0.png", "cat;dog", None), ("1.png", "bird;dog", None), *((f"{i}.png", "", None) for i in range(2, 10))]
    for seed in range(20):
        for fraction in (0.1, 0.2, 0.3, 0.5):
            split = hold_out(rows, fraction, seed)
            trained = {name for _, labels, part in split if part == "train" for name in labels.split(SEPARATOR)}
            assert {"bird", "cat", "dog"} <= trained, (seed, fraction, split)
{% endif %}

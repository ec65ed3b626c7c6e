"""Class folders and CSVs read directly: each refusal's exact message, and what is (not) a class or a row."""

import pytest
import torch

from {{ cookiecutter.package_name }}.core.errors import DataError
from {{ cookiecutter.package_name }}.data.layouts import (
    LabelledFiles,
    check_class_names,
    hold_out,
    image_status,
    is_image,
    read_class_folders,
    read_csv,
    write_split,
)


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_class_folders_are_the_visible_folders_holding_images_at_any_depth(tmp_path):
    touch(tmp_path / "cats" / "a.png")
    touch(tmp_path / "cats" / "deeper" / "b.JPG")
    touch(tmp_path / "cats" / ".hidden.png")
    touch(tmp_path / "cats" / "notes.txt")
    touch(tmp_path / ".ipynb_checkpoints" / "c.png")  # not a class
    touch(tmp_path / "dogs" / "d.png")
    touch(tmp_path / "stray.png")
    rows = read_class_folders(tmp_path)
    assert rows == [("cats/a.png", "cats", None), ("cats/deeper/b.JPG", "cats", None), ("dogs/d.png", "dogs", None)]


def test_a_folder_without_class_folders_of_images_is_refused(tmp_path):
    touch(tmp_path / "stray.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as raised:
        read_class_folders(tmp_path)
    expected = f"--data {tmp_path} holds no class folders with images; put images in {tmp_path}/<class>/"
    assert str(raised.value) == expected


def test_one_image_under_two_names_in_class_folders_is_refused_naming_both(tmp_path):
    """Through a symbolic or a hard link, or a linked class folder, the same pixels would get two labels (or count
    twice in one class, or land in both splits): refused whatever the classes, each name once, then nothing else."""
    for name in ("cat/0.png", "cat/1.png", "dog/0.png"):
        touch(tmp_path / name)
    (tmp_path / "cat" / "link.png").symlink_to("../dog/0.png")
    expected = f"--data {tmp_path}: cat/link.png and dog/0.png are the same image; keep one"
    with pytest.raises(DataError) as raised:
        read_class_folders(tmp_path)
    assert str(raised.value) == expected
    (tmp_path / "cat" / "link.png").unlink()
    (tmp_path / "dog" / "hard.png").hardlink_to(tmp_path / "cat" / "1.png")
    with pytest.raises(DataError) as raised:
        read_class_folders(tmp_path)
    assert str(raised.value) == f"--data {tmp_path}: cat/1.png and dog/hard.png are the same image; keep one"
    (tmp_path / "dog" / "hard.png").unlink()
    (tmp_path / "cat" / "deeper").mkdir()
    (tmp_path / "cat" / "deeper" / "again.png").symlink_to(tmp_path / "cat" / "0.png")  # within one class too
    with pytest.raises(DataError) as raised:
        read_class_folders(tmp_path)
    assert str(raised.value) == f"--data {tmp_path}: cat/0.png and cat/deeper/again.png are the same image; keep one"
    (tmp_path / "cat" / "deeper" / "again.png").unlink()
    (tmp_path / "kitten").symlink_to("cat")  # a class folder that is another one
    with pytest.raises(DataError) as raised:
        read_class_folders(tmp_path)
    assert str(raised.value) == f"--data {tmp_path}: cat/0.png and kitten/0.png are the same image; keep one"
    (tmp_path / "kitten").unlink()
    (tmp_path / "dog" / "broken.png").symlink_to("nowhere.png")  # no image, as before
    assert [path for path, _, _ in read_class_folders(tmp_path)] == ["cat/0.png", "cat/1.png", "dog/0.png"]


def write_csv(tmp_path, text: str, images=("a.png", "b.png", "c.png")):
    for name in images:
        touch(tmp_path / name)
    path = tmp_path / "labels.csv"
    path.write_bytes(text.encode("utf-8"))
    return path


def refusal(path, root, need_split=False) -> str:
    with pytest.raises(DataError) as raised:
        read_csv(path, root, need_split=need_split)
    return str(raised.value)


def test_a_csv_lacking_columns_names_each_missing_one(tmp_path):
    path = write_csv(tmp_path, "path\na.png\n")
    end = "; its first line must name path,label[,split]"
    assert refusal(path, tmp_path) == f"{path} lacks the column(s) label{end}"
    assert refusal(path, tmp_path, need_split=True) == f"{path} lacks the column(s) label, split{end}"
    path = write_csv(tmp_path, "path,label\na.png,cat\n")
    assert refusal(path, tmp_path, need_split=True) == f"{path} lacks the column(s) split{end}"
    assert read_csv(path, tmp_path) == [("a.png", "cat", None)]


@pytest.mark.parametrize(
    "row, message",
    [
        (",cat", "line 3: path and label must both be given"),
        ("b.png,", "line 3: path and label must both be given"),
        ("b.png", "line 3: path and label must both be given"),  # a short row
        ("b.png,cat,", "line 3: split '' must be train or val"),
        ("b.png,cat", "line 3: split '' must be train or val"),
        ("b.png,cat,test", "line 3: split 'test' must be train or val"),
        ("missing.png,cat,train", "line 3: {root}/missing.png does not exist; fix the path or remove the row"),
    ],
)
def test_each_bad_csv_row_is_refused_naming_its_line(tmp_path, row, message):
    path = write_csv(tmp_path, f"path,label,split\na.png,cat,train\n{row}\nc.png,dog,val\n")
    assert refusal(path, tmp_path) == f"{path} " + message.format(root=tmp_path)


def test_an_image_listed_twice_under_two_names_is_refused_naming_both_lines(tmp_path):
    path = write_csv(tmp_path, "path,label\na.png,cat\nb.png,dog\nc.png,dog\n./b.png,cat\n")
    assert refusal(path, tmp_path) == f"{path} lines 3 and 5 list ./b.png; list it once"
    (tmp_path / "link.png").symlink_to(tmp_path / "c.png")
    path = write_csv(tmp_path, "path,label\na.png,cat\nc.png,dog\nlink.png,cat\n")
    assert refusal(path, tmp_path) == f"{path} lines 3 and 4 list the same image as c.png and link.png; list it once"


def test_an_unreadable_or_empty_csv_is_refused(tmp_path):
    path = write_csv(tmp_path, "path,label\n")
    assert refusal(path, tmp_path) == f"{path} lists no images; add rows of path,label"
    path.write_bytes(b"path,label\na.png,caf\xe9\n")
    assert refusal(path, tmp_path).startswith(f"cannot read {path} ('utf-8' codec can't decode byte 0xe9")
    assert refusal(tmp_path / "none.csv", tmp_path).startswith(f"cannot read {tmp_path / 'none.csv'} ([Errno 2]")


def test_a_quoted_cell_keeps_its_line_break_and_line_numbers_count_it(tmp_path):
    path = write_csv(tmp_path, 'path,label\r\na.png,"two\r\nlines"\r\nb.png,dog\r\n,dog\r\n')
    assert refusal(path, tmp_path) == f"{path} line 5: path and label must both be given"
    path.write_bytes(b'path,label\r\na.png,"two\r\nlines"\r\nb.png,dog\r\n')
    assert read_csv(path, tmp_path) == [("a.png", "two\r\nlines", None), ("b.png", "dog", None)]


@pytest.mark.parametrize("name", ["tab\there", "two\nlines", "esc\x1b[31m", "line\u2028sep", "para\u2029sep"])
def test_a_class_name_holding_a_control_character_is_refused(name):
    with pytest.raises(DataError) as raised:
        check_class_names(["fine", name], "data/x")
    assert str(raised.value) == (
        f"--data data/x: class {name!r} holds a control character (a line break, tab or terminal escape); rename it"
    )


def test_a_class_name_that_is_not_utf8_is_refused_and_ordinary_names_pass():
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    with pytest.raises(DataError) as raised:
        check_class_names([name], "photos")
    assert str(raised.value) == f"--data photos: class {name!r} is not valid UTF-8 text; rename it"
    check_class_names(["café", "two words", "ünïcode 猫", "a-b_c.d"], "photos")


def test_a_hold_out_depends_on_its_seed_only():
    rows = [(f"{label}/{i}.png", label, None) for label in ("a", "b") for i in range(20)]
    torch.manual_seed(1)
    first = hold_out(rows, 0.25, seed=3)
    torch.manual_seed(2)
    assert hold_out(rows, 0.25, seed=3) == first  # whatever the global random state
    assert hold_out(rows, 0.25, seed=4) != first
    assert [label for _, label, split in first if split == "val"] == ["a"] * 5 + ["b"] * 5


def test_a_written_split_reads_back_as_it_was(tmp_path):
    rows = [("a.png", "cat", "train"), ("b.png", "dog, the big one", "val")]
    for name, _, _ in rows:
        touch(tmp_path / name)
    write_split(tmp_path / "split.csv", rows)
    assert read_csv(tmp_path / "split.csv", tmp_path, need_split=True) == rows


def test_labelled_files_without_a_transform_give_the_loaded_image(tmp_path):
    files = LabelledFiles(tmp_path, [("a.png", "dog", None), ("b.png", "cat", None)], ["cat", "dog"], loader=len)
    assert len(files) == 2 and files.targets == [1, 0]
    assert files[0] == (len(str(tmp_path / "a.png")), 1)
    files.transform = lambda image: -image
    assert files[1] == (-len(str(tmp_path / "b.png")), 0)


def test_split_csv_lines_end_in_a_plain_line_feed(tmp_path):
    touch(tmp_path / "a.png")
    write_split(tmp_path / "split.csv", [("a.png", "cat", "train")])
    assert (tmp_path / "split.csv").read_bytes() == b"path,label,split\na.png,cat,train\n"


def test_only_regular_visible_image_files_are_images(tmp_path, monkeypatch):
    touch(tmp_path / "a.png")
    touch(tmp_path / "._a.png")  # macOS's shadow of a.png
    (tmp_path / "folder.png").mkdir()
    assert [is_image(tmp_path / name) for name in ("a.png", "._a.png", "folder.png")] == [True, False, False]
    assert image_status(tmp_path / "a.png") and image_status(tmp_path / "folder.png") is None
    denied = PermissionError(13, "Permission denied")
    monkeypatch.setattr(type(tmp_path), "stat", lambda self, **kwargs: (_ for _ in ()).throw(denied))
    with pytest.raises(DataError) as raised:
        image_status(tmp_path / "a.png")
    assert str(raised.value) == f"cannot read {tmp_path / 'a.png'} (Permission denied); check its permissions"

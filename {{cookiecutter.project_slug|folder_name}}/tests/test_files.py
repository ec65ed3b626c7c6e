import os

import pytest
import torch

from {{ cookiecutter.package_name }}.core.files import replacing, save, write_text


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "metrics.csv"
    write_text(target, "old")
    with pytest.raises(RuntimeError), replacing(target, "w") as file:
        file.write("half of the new")
        raise RuntimeError("disk full")
    assert target.read_text() == "old" and sorted(tmp_path.iterdir()) == [target]


def test_written_files_get_the_usual_permissions(tmp_path):
    save({"x": torch.ones(2)}, tmp_path / "model.pt")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "model.pt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert torch.equal(torch.load(tmp_path / "model.pt", weights_only=True)["x"], torch.ones(2))


def test_a_failed_write_names_the_file_and_the_reason_in_one_line():
    from pathlib import Path

    from {{ cookiecutter.package_name }}.core.errors import OutputError
    from {{ cookiecutter.package_name }}.core.files import cannot_write

    full = cannot_write(Path("out/model.pt"), OSError(28, "No space left on device"))
    assert isinstance(full, OutputError) and full.exit_code == 5
    advice = "free some space or pick a folder on another disk"
    assert str(full) == f"cannot write out/model.pt (No space left on device); {advice}"
    plain = cannot_write(Path("x.csv"), OSError("the write failed: short write"))  # no errno: the message itself
    assert str(plain) == "cannot write x.csv (the write failed: short write); free some space or pick a writable folder"


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        ("ENOSPC", "free some space or pick a folder on another disk"),
        ("EFBIG", "free some space or pick a folder on another disk"),  # a file-size limit
        ("EDQUOT", "free some space or pick a folder on another disk"),  # a quota
        ("ENOENT", "create the missing folder or pick another"),
        ("ENOTDIR", "a file stands where the path needs a folder; move it or pick another"),
        ("EISDIR", "a folder stands in its place; move it or pick another name"),
        ("EACCES", "pick a writable folder"),
        ("EPERM", "pick a writable folder"),
        ("EROFS", "pick a writable folder"),
        ("EIO", "free some space or pick a writable folder"),  # anything else: the general advice
    ],
)
def test_the_advice_on_a_failed_write_fits_its_reason(code, advice):
    import errno
    from pathlib import Path

    from {{ cookiecutter.package_name }}.core.files import cannot_write

    number = getattr(errno, code)
    assert str(cannot_write(Path("out/x"), OSError(number, os.strerror(number)))).endswith(f"); {advice}")


def test_a_missing_folder_or_a_folder_in_the_way_is_said_so(tmp_path):
    from {{ cookiecutter.package_name }}.core.errors import OutputError

    with pytest.raises(OutputError, match=r"\(No such file or directory\); create the missing folder or pick another$"):
        write_text(tmp_path / "missing" / "x.csv", "x")
    (tmp_path / "x.csv").mkdir()
    with pytest.raises(OutputError, match=r"\(Is a directory\); a folder stands in its place; move it or pick another"):
        write_text(tmp_path / "x.csv", "x")
    assert [path.name for path in tmp_path.iterdir()] == ["x.csv"]  # no temporary file left


def test_own_folder_creates_missing_parents_and_accepts_an_existing_folder(tmp_path):
    from {{ cookiecutter.package_name }}.core.files import own_folder

    target = tmp_path / "a" / "b" / "c"
    assert own_folder(target) == target and target.is_dir()
    (target / "kept.txt").write_text("kept")
    assert own_folder(str(target)) == target and (target / "kept.txt").read_text() == "kept"


def test_own_folder_replaces_a_planted_link_by_a_real_folder_unless_told_not_to(tmp_path):
    from {{ cookiecutter.package_name }}.core.files import own_folder

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("precious")
    planted = tmp_path / "out"
    planted.symlink_to(elsewhere, target_is_directory=True)
    assert own_folder(planted) == planted
    assert planted.is_dir() and not planted.is_symlink() and list(planted.iterdir()) == []
    assert (elsewhere / "precious.txt").read_text() == "precious"  # the link's target is left alone
    chosen = tmp_path / "chosen"
    chosen.symlink_to(elsewhere, target_is_directory=True)
    assert own_folder(chosen, replace_link=False) == chosen and chosen.is_symlink()  # a folder the user named
    assert (chosen / "precious.txt").read_text() == "precious"


def test_own_folder_that_cannot_be_made_is_an_output_error_naming_it(tmp_path):
    from {{ cookiecutter.package_name }}.core.errors import OutputError
    from {{ cookiecutter.package_name }}.core.files import own_folder

    (tmp_path / "a_file").write_text("not a folder")
    target = tmp_path / "a_file" / "run"
    with pytest.raises(OutputError, match=r"^cannot write .*a_file/run \(Not a directory\); a file stands") as raised:
        own_folder(target)
    assert raised.value.exit_code == 5


def test_a_torch_save_that_fails_is_one_line_naming_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.core.errors import OutputError

    target = tmp_path / "model.pt"
    save({"x": torch.zeros(1)}, target)

    def failing(obj, file):
        file.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:783] . PytorchStreamWriter failed writing file\nmore")

    monkeypatch.setattr(torch, "save", failing)
    with pytest.raises(OutputError) as raised:
        save({"x": torch.ones(1)}, target)
    reason = "the write failed: [enforce fail at inline_container.cc:783] . PytorchStreamWriter failed writing file"
    assert str(raised.value) == f"cannot write {target} ({reason}); free some space or pick a writable folder"
    monkeypatch.undo()
    assert torch.equal(torch.load(target, weights_only=True)["x"], torch.zeros(1))
    assert sorted(tmp_path.iterdir()) == [target]

import os

import pytest
import torch

from {{ cookiecutter.package_name }}.files import replacing, save, write_text


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

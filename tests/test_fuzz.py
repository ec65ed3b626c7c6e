"""Property test: any free-text answers give either one clean `ERROR:` refusal or a render that compiles
and parses, with the text intact where it belongs."""

import ast
import shutil
import tempfile
from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from helpers import ROOT, package_of, tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow
# cookiecutter itself renders answers given on its command line as Jinja, so "{{", "{%" and "{#" there are
# cookiecutter's business (typed at the prompt they are taken literally), as is Jinja turning "\r" into "\n".
free_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r")
    | st.sampled_from(list("\"'\\{}%#\n\t`$ ")),
    max_size=40,
).filter(lambda text: not any(token in text for token in ("{{", "{%", "{#")))
gpu_ids = st.one_of(st.sampled_from(["", "0", "0,1", "3,2", "0,0", "a", "-1", "0,,1", " 1, 2 "]), st.text(max_size=6))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=free_text, description=free_text, author=free_text, gpus=gpu_ids)
def test_any_answers_refuse_cleanly_or_render_valid_files(capfd, name, description, author, gpus):
    answers = {"project_name": name, "description": description, "author_name": author, "gpu_ids": gpus}
    out = Path(tempfile.mkdtemp())
    try:
        try:
            project = Path(cookiecutter(str(ROOT), no_input=True, extra_context=answers, output_dir=str(out)))
        except FailedHookException:
            errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("ERROR: ")]
            assert len([e for e in errors if "hook script" not in e]) == 1, errors
            assert list(out.iterdir()) == []
            return
        capfd.readouterr()
        meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
        assert meta["description"] == description and meta["authors"] == [{"name": author}]
        init = project / "src" / package_of(project) / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text()), clean=False) == description
        for path in (init, init.parent / "cli.py", init.parent / "config.py"):  # where answers are written
            compile(path.read_text(), str(path), "exec")
    finally:
        shutil.rmtree(out)

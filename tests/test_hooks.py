"""The pre-generation hook: every bad answer is one `ERROR:` line and leaves nothing on disk."""

import ast
import json
import re
from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from helpers import (
    CHOICES,
    CONTEXT,
    ROOT,
    SYSTEM_TEMP,
    TEMPLATE,
    bake,
    baked_project,
    last_output_dir,
    package_of,
    tomllib,
)


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"project_name": "   "}, "project_name is empty"),
        ({"project_slug": "My Project"}, "project_slug 'My Project' (the folder name"),
        ({"project_name": "2048 Classifier"}, "project_slug '2048-classifier' (the folder name"),
        ({"package_name": "my-package"}, "not a lower-case Python identifier"),
        ({"package_name": "class"}, "not a lower-case Python identifier"),
        ({"package_name": "torch"}, "would shadow the module"),
        ({"package_name": "json"}, "would shadow the module"),
        ({"package_name": "test"}, "would shadow the module"),
        ({"package_name": "a" * 41}, "at most 40 characters"),
        ({"gpu_ids": "a,b"}, "must be comma-separated GPU numbers"),
        ({"gpu_ids": "0,,1"}, "must be comma-separated GPU numbers"),
        ({"gpu_ids": "-1"}, "must be comma-separated GPU numbers"),
        ({"gpu_ids": "0,1,0"}, "lists a GPU twice"),
    ],
)
def test_bad_answers_give_one_error_line_and_no_output(cookies, capfd, answers, message):
    result = bake(cookies, **answers)
    assert result.exit_code != 0
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ") and "hook script" not in line]
    assert len(errors) == 1 and message in errors[0], errors
    assert list(last_output_dir(cookies).iterdir()) == []


def test_a_model_outside_the_choices_is_refused(cookies):
    result = bake(cookies, model="alexnet_xl")
    assert result.exit_code != 0 and "choices" in str(result.exception)


@pytest.mark.parametrize(
    "text",
    ['Quotes " and \' and """ triple', "back\\slash \\n, a tab\t, {braces} and %s", "Ünïcödé – 分類器 🐈"],
)
def test_free_text_renders_safely_and_intact(cookies, text):
    project = baked_project(cookies, project_name="Safe Name", description=text, author_name=text)
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["description"] == text and meta["authors"] == [{"name": text}]
    package = project / "src" / package_of(project)
    assert ast.get_docstring(ast.parse((package / "__init__.py").read_text()), clean=False) == text
    for path in project.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    assert text in (project / "README.md").read_text()


@pytest.mark.parametrize("answer", ["", "cpu", "none", " CPU "])
def test_gpu_ids_cpu_none_or_empty_mean_cpu_only_and_read_so(cookies, answer):
    project = baked_project(cookies, gpu_ids=answer)
    assert 'gpus: str = option("cpu",' in (project / "src" / package_of(project) / "config.py").read_text()
    assert "| `--gpus` | `cpu` |" in (project / "README.md").read_text()  # not an empty code span


def test_hooks_leave_no_temp_files_in_the_system_temp_dir(cookies):
    before = set(SYSTEM_TEMP.glob("tmp*.py"))
    baked_project(cookies)
    bake(cookies, gpu_ids="x")
    assert set(SYSTEM_TEMP.glob("tmp*.py")) == before


def test_answers_typed_at_the_prompt_are_taken_literally_even_jinja(tmp_path):
    """Typed answers are data and never rendered again; cookiecutter's replay takes the same path."""
    text = 'Braces {{ x }}, {% if y %} and {# z #}, """ and \\ too'
    context = {key: value for key, value in CONTEXT.items() if key != "__prompts__"}
    context |= {key: options[0] for key, options in CHOICES.items()}
    context |= {"project_name": text, "project_slug": "typed", "package_name": "typed"}
    context |= {"description": text, "author_name": text}
    replay = tmp_path / "answers.json"
    replay.write_text(json.dumps({"cookiecutter": context}))
    project = Path(cookiecutter(str(ROOT), replay=str(replay), output_dir=str(tmp_path / "out")))
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["description"] == text and meta["authors"] == [{"name": text}]
    for path in project.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    assert (project / "README.md").read_text().startswith(f"# {text}\n")


def replay_file(tmp_path: Path, **answers) -> Path:
    context = {key: value for key, value in CONTEXT.items() if key != "__prompts__"}
    context |= {key: options[0] for key, options in CHOICES.items()} | answers
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"cookiecutter": context}))
    return replay


INJECTED = "small_cnn\", \"x\"); open(__import__('os').environ['MARKER'], 'w').close(); (\""


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_a_replayed_choice_outside_the_list_is_refused_and_nothing_is_written(tmp_path, capfd, monkeypatch, key):
    """A replay file (or --extra-context) can carry any value; only cookiecutter.json's options may render."""
    monkeypatch.setenv("MARKER", str(tmp_path / "ran"))
    replay = replay_file(tmp_path, project_slug="replayed", package_name="replayed", **{key: INJECTED})
    with pytest.raises(FailedHookException):
        cookiecutter(str(ROOT), replay=str(replay), output_dir=str(tmp_path / "out"))
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("ERROR: ") and "hook" not in line]
    assert len(errors) == 1 and f"ERROR: {key} " in errors[0] and "is not one of the choices" in errors[0], errors
    assert not (tmp_path / "out" / "replayed").exists() and not (tmp_path / "ran").exists()


def test_choice_values_are_rendered_escaped_in_python(tmp_path):
    """Defence in depth: the answers that land in code go through the `escaped` filter."""
    for path in TEMPLATE.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"\{\{\s*cookiecutter\.(model|amp_precision|gpu_ids)\s*\}\}", text), path


def test_a_replayed_slug_that_leaves_the_output_folder_creates_nothing(tmp_path, capfd):
    """cookiecutter creates the project folder before the pre-generation hook: the folder name's filter refuses."""
    out = tmp_path / "nest" / "out"
    replay = replay_file(tmp_path, project_slug="../outside/deep/evil", package_name="evil")
    with pytest.raises(FailedHookException):
        cookiecutter(str(ROOT), replay=str(replay), output_dir=str(out))
    assert "ERROR: project_slug '../outside/deep/evil'" in capfd.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "nest").rglob("*")) in ([], [Path("nest/out")])

"""The pre-generation hook: every bad answer is one `ERROR:` line and leaves nothing on disk."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from checks import tomllib
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from cookiecutter.prompt import YesNoPrompt
from render import (
    CHOICES,
    CONTEXT,
    ROOT,
    SYSTEM_TEMP,
    TEMPLATE,
    YES_NO,
    assert_refused,
    bake,
    baked_project,
    package_of,
    render,
    replay_file,
)
from rich.prompt import PromptBase

import local_extensions


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
def test_bad_answers_give_one_error_line_and_no_output(tmp_path, capfd, answers, message):
    error = assert_refused(tmp_path, capfd, "extra", **answers)
    assert message in error, error


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
    assert 'gpus: str = option("cpu",' in (project / "src" / package_of(project) / "config" / "__init__.py").read_text()
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


# --- Answers of the wrong type or unwritable text, from a replay file, --extra-context or the prompt ---------------

TEXT = sorted(key for key, value in CONTEXT.items() if isinstance(value, str) and not key.startswith("_"))


@pytest.mark.parametrize(
    ("via", "value"),
    [
        ("replay", "no"),  # a replay file keeps strings as they are: "no" is a non-empty string, true in Jinja
        ("replay", "false"),
        ("replay", "yes"),
        ("replay", ""),
        ("replay", 0),
        ("replay", 1),
        ("replay", None),
        ("replay", []),
        ("extra", 0),  # --no-input renders a non-string as text: 0 became "0", true in Jinja
        ("extra", None),
    ],
)
@pytest.mark.parametrize("key", ["use_amp", "use_checkpointing"])  # one off and one on by default
def test_a_yes_no_answer_that_is_not_a_boolean_is_refused(tmp_path, capfd, via, value, key):
    error = assert_refused(tmp_path, capfd, via, **{key: value})
    assert error.startswith(f"ERROR: {key} ") and "answer true or false (yes or no at the prompt)" in error, error


@pytest.mark.parametrize(
    ("via", "value", "on"),
    [
        ("replay", True, True),
        ("replay", False, False),
        ("extra", True, True),
        ("extra", False, False),
        ("extra", "no", False),  # cookiecutter 2.7 turns a yes/no string of --extra-context into a bool itself
        ("extra", "Yes", True),
        ("extra", "0", False),
        ("extra", "on", True),
    ],
)
def test_a_yes_no_answer_that_cookiecutter_delivers_as_a_boolean_renders(tmp_path, via, value, on):
    project = render(tmp_path, via, use_amp=value)
    assert (project / "src" / package_of(project) / "training/amp.py").exists() is on


def test_a_yes_no_extra_context_string_cookiecutter_cannot_read_stops_it_before_any_template_code(tmp_path):
    """Not ours to word: cookiecutter refuses it while reading the answers, before the template is involved."""
    with pytest.raises(ValueError, match="could not be converted to a boolean"):
        render(tmp_path, "extra", use_amp="maybe")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("typed", ["yes", "no"])
def test_yes_no_typed_at_the_prompt_arrive_as_booleans_and_render(tmp_path, monkeypatch, typed):
    """At the prompt cookiecutter turns yes/no into real booleans; every other prompt takes its default."""
    monkeypatch.setattr(PromptBase, "get_input", classmethod(lambda cls, *args, **kwargs: ""))
    monkeypatch.setattr(YesNoPrompt, "get_input", classmethod(lambda cls, *args, **kwargs: typed))
    project = Path(cookiecutter(str(ROOT), output_dir=str(tmp_path / "out")))
    answers = json.loads((project / ".cookiecutter.json").read_text())["cookiecutter"]
    assert {key: answers[key] for key in YES_NO} == dict.fromkeys(YES_NO, typed == "yes")
    assert (project / "src" / package_of(project) / "training/amp.py").exists() is (typed == "yes")


@pytest.mark.parametrize(
    ("via", "key", "value"),
    [
        ("replay", "project_name", 5),
        ("replay", "project_name", None),
        ("replay", "project_name", ["My", "Project"]),
        ("replay", "gpu_ids", 0),
        ("replay", "gpu_ids", None),
        ("replay", "gpu_ids", [0, 1]),
        ("replay", "project_slug", 5),  # the folder name: refused where it is rendered, before the folder exists
        ("replay", "package_name", 5),
        ("replay", "description", 5),
        ("replay", "author_name", None),
        ("replay", "author_name", {"name": "x"}),
        ("extra", "project_name", None),  # fails while the slug is derived from it, before the hook
        ("extra", "project_name", {"a": 1}),
        ("extra", "project_slug", None),
        ("extra", "gpu_ids", None),
        ("extra", "description", None),
    ],
)
def test_a_text_answer_that_is_not_text_is_refused(tmp_path, capfd, via, key, value):
    error = assert_refused(tmp_path, capfd, via, **{key: value})
    assert error.startswith(f"ERROR: {key} ") and "must be text" in error, error


@pytest.mark.parametrize(
    ("via", "answers", "length"),
    [
        ("extra", {"project_name": "x" * 300}, "300 characters"),  # was: OSError "File name too long"
        ("replay", {"project_name": "x" * 300, "project_slug": "x" * 300}, "300 characters"),
        ("replay", {"project_slug": "\u00e9" * 130}, "260 bytes in UTF-8"),  # 130 characters, over 255 bytes
    ],
)
def test_a_project_name_too_long_for_a_folder_is_refused_before_the_folder_exists(
    tmp_path, capfd, via, answers, length
):
    error = assert_refused(tmp_path, capfd, via, **answers)
    assert error.startswith("ERROR: project_slug '") and f"is {length} long" in error, error
    assert "at most 100 characters" in error, error


def test_a_slug_of_100_characters_is_a_folder_name(tmp_path, capfd):
    project = render(tmp_path, "extra", project_name="a" * 100, package_name="long_one")
    assert project.name == "a" * 100
    assert_refused(tmp_path / "101", capfd, "extra", project_name="a" * 101, package_name="long_one")


@pytest.mark.parametrize(
    ("via", "key", "value"),
    [
        ("extra", "description", "\ud800"),  # a lone surrogate: Python holds it, UTF-8 cannot write it
        ("replay", "description", "\ud800"),
        ("extra", "author_name", "Ann \udcff"),
        ("extra", "project_name", "ab\ud800c"),
        ("replay", "project_slug", "ab\ud800c"),  # the folder name: refused before the folder exists
        ("replay", "package_name", "ab\udfffc"),
        ("replay", "gpu_ids", "0,\ud801"),
        ("replay", "model", "\ud800"),
    ],
)
def test_text_that_utf8_cannot_encode_is_refused_and_nothing_is_written(tmp_path, capfd, via, key, value):
    error = assert_refused(tmp_path, capfd, via, **{key: value})
    assert error.startswith(f"ERROR: {key} ") and "UTF-8" in error, error


def planted_module(tmp_path: Path, monkeypatch, name: str) -> Path:
    """A module on sys.path that leaves a file behind when it is imported, with a Jinja extension in it."""
    marker = tmp_path / f"{name}-imported"
    (tmp_path / f"{name}.py").write_text(
        f"from jinja2.ext import Extension\nopen({str(marker)!r}, 'w').close()\n\nclass Ext(Extension):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return marker


def test_a_replayed_extension_after_the_templates_own_is_refused_before_it_is_imported(tmp_path, capfd, monkeypatch):
    marker = planted_module(tmp_path, monkeypatch, "planted_after")
    extensions = [*CONTEXT["_extensions"], "planted_after.Ext"]
    error = assert_refused(tmp_path, capfd, "replay", _extensions=extensions)
    assert error.startswith("ERROR: _extensions ") and "planted_after.Ext" in error, error
    assert not marker.exists()


def test_a_replayed_extension_before_the_templates_own_is_imported_by_cookiecutter_then_refused(
    tmp_path, capfd, monkeypatch
):
    """The limitation: cookiecutter imports the extensions in the listed order before any template code runs, so
    one listed before the template's own is imported; the render is still refused with nothing written."""
    marker = planted_module(tmp_path, monkeypatch, "planted_before")
    extensions = ["planted_before.Ext", *CONTEXT["_extensions"]]
    error = assert_refused(tmp_path, capfd, "replay", _extensions=extensions)
    assert error.startswith("ERROR: _extensions ") and "planted_before.Ext" in error, error
    assert marker.exists()


def test_the_hook_refuses_a_foreign_extension_where_the_extension_cannot_see_the_answers(tmp_path, capfd, monkeypatch):
    """The second line of defence (another cookiecutter, whose frames the extension does not know)."""
    monkeypatch.setattr(local_extensions, "refuse_foreign_extensions", lambda: None)
    marker = planted_module(tmp_path, monkeypatch, "planted_hook")
    error = assert_refused(tmp_path, capfd, "replay", _extensions=[*CONTEXT["_extensions"], "planted_hook.Ext"])
    assert error.startswith("ERROR: _extensions lists planted_hook.Ext, which this template does not use"), error
    assert marker.exists()  # imported: only the extension's check comes before that


def test_extensions_from_extra_context_are_refused_by_cookiecutter_before_any_import(tmp_path, monkeypatch):
    """cookiecutter accepts only a subset of the template's own list from --extra-context."""
    marker = planted_module(tmp_path, monkeypatch, "planted_extra")
    with pytest.raises(ValueError, match="valid choices are"):
        render(tmp_path, "extra", _extensions=["planted_extra.Ext"])
    assert not marker.exists() and not (tmp_path / "out").exists()


# --- After a render --------------------------------------------------------------------------------------------------


def test_a_render_ends_with_the_next_steps_naming_its_folder(cookies, capfd, tmp_path, monkeypatch):
    project = baked_project(cookies, project_name="Flower Classifier")
    out = capfd.readouterr().out
    assert f'Next: cd {project} && pip install -e ".[dev]" && flower-classifier train' in out, out
    assert "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu" in out, out
    monkeypatch.setenv("PWD", str(tmp_path / "out"))  # the shell's folder is where the project was created
    render(tmp_path, "extra", project_name="Flower Classifier")
    lines = [line for line in capfd.readouterr().out.splitlines() if line.strip()]
    assert lines[-2] == 'Next: cd flower-classifier && pip install -e ".[dev]" && flower-classifier train', lines


@pytest.mark.parametrize(("gpu_ids", "noted"), [("cpu", True), ("0", False)])
def test_mixed_precision_for_a_cpu_says_what_a_cpu_without_bf16_does(tmp_path, capfd, gpu_ids, noted):
    render(tmp_path, "extra", use_amp=True, gpu_ids=gpu_ids)
    note = "a CPU without bf16 instructions (AVX2 and older) trains in fp32, saying so: bf16 is ~8x slower."
    assert (note in capfd.readouterr().out) == noted


def test_a_render_over_an_existing_project_keeps_its_own_empty_files(tmp_path):
    """Files of features that are off render empty and are removed; on `cookiecutter -f` over a project, the user's
    own empty files (a package's __init__.py, a .gitkeep) are not the template's and stay."""
    project = render(tmp_path, "no_input")
    package = project / "src" / package_of(project)
    own = [package / "extra" / "__init__.py", project / "tests" / "__init__.py", project / "data" / ".gitkeep"]
    for path in own:
        path.parent.mkdir(exist_ok=True)
        path.touch()
    again = cookiecutter(str(ROOT), no_input=True, overwrite_if_exists=True, output_dir=str(tmp_path / "out"))
    assert Path(again) == project and all(path.is_file() for path in own)
    training = package / "training"
    assert not (training / "amp.py").exists() and (training / "checkpoint.py").is_file()  # off and on by default


def test_a_render_run_inside_the_template_folder_removes_the_files_of_features_that_are_off(tmp_path):
    """`cookiecutter .` gives cookiecutter a relative template path, which the hooks (run in the new project's
    folder) cannot use: the post-generation hook finds the template where its Jinja extension is."""
    done = subprocess.run(
        [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(tmp_path), "."],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    package = next((tmp_path / "my-project" / "src").iterdir())
    assert not (package / "training/amp.py").exists() and (package / "training/checkpoint.py").is_file()

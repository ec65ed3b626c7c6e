"""Property tests: any answers give either one clean `ERROR:` refusal or a render that compiles and parses, with the
text intact where it belongs; answers no prompt could give (text UTF-8 cannot encode, a non-text answer to a text
prompt, anything but true/false to a yes/no prompt) are always refused."""

import ast
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from checks import tomllib
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from render import CHOICES, CONTEXT, ROOT, package_of
from tricks import TRICKS, assert_files_exactly_for, features_on

pytestmark = pytest.mark.slow
# cookiecutter itself renders answers given on its command line as Jinja, so "{{", "{%" and "{#" there are
# cookiecutter's business (typed at the prompt they are taken literally), as is Jinja turning "\r" into "\n".
free_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r")
    | st.sampled_from(list("\"'\\{}%#\n\t`$ ")),
    max_size=40,
).filter(lambda text: not any(token in text for token in ("{{", "{%", "{#")))
gpu_ids = st.one_of(st.sampled_from(["", "0", "0,1", "3,2", "0,0", "a", "-1", "0,,1", " 1, 2 "]), st.text(max_size=6))


def rarely(common, rare, one_in: int):
    """Mostly `common`, about one draw in `one_in` `rare`: the wrong answers must not crowd out the renders.
    (Rare on a middle number: hypothesis draws the smallest one far more often than its share.)"""
    middle = one_in // 2
    return st.tuples(st.integers(1, one_in), common, rare).map(
        lambda drawn: drawn[2] if drawn[0] == middle else drawn[1]
    )


# Text that Python holds and UTF-8 cannot write: a lone surrogate ("\ud800", category Cs) somewhere in it.
unwritable_text = st.tuples(free_text, st.characters(categories=["Cs"]), st.integers(0, 40)).map(
    lambda drawn: drawn[0][: drawn[2]] + drawn[1] + drawn[0][drawn[2] :]
)
any_text = rarely(free_text, unwritable_text, 25)
# What a JSON file can hold where a prompt gives text or a yes/no: a replay file passes it on untouched.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.floats(allow_nan=False, allow_infinity=False) | any_text,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(any_text, inner, max_size=2),
    max_leaves=4,
)


def writable(value) -> bool:
    """No text anywhere in the value (keys included) that UTF-8 cannot encode."""
    if isinstance(value, str):
        return not any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return all(writable(key) and writable(item) for key, item in value.items())
    return all(map(writable, value)) if isinstance(value, list) else True


def bake_or_refuse(capfd, out: Path, **how) -> Path | None:
    """The render's folder, or None after checking the refusal: one `ERROR:` line and nothing on disk."""
    try:
        project = Path(cookiecutter(str(ROOT), output_dir=str(out), **how))
    except FailedHookException:
        errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("ERROR: ")]
        assert len([e for e in errors if "hook script" not in e]) == 1, errors
        assert not out.exists() or list(out.iterdir()) == []
        event("refused")  # pytest --hypothesis-show-statistics: how many of each
        return None
    capfd.readouterr()
    event("rendered")
    return project


def assert_valid_render(project: Path, description, author) -> None:
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["description"] == description and meta["authors"] == [{"name": author}]
    init = project / "src" / package_of(project) / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text()), clean=False) == description
    for path in (init, init.parent / "cli.py", init.parent / "config" / "__init__.py"):  # where answers are written
        compile(path.read_text(), str(path), "exec")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=rarely(any_text, st.none() | st.integers(0, 9), 25),  # --no-input turns 5 into "5"; null stays null
    description=any_text,
    author=any_text,
    gpus=rarely(gpu_ids, st.none(), 25),
)
def test_any_answers_refuse_cleanly_or_render_valid_files(capfd, name, description, author, gpus):
    answers = {"project_name": name, "description": description, "author_name": author, "gpu_ids": gpus}
    out = Path(tempfile.mkdtemp())
    try:
        project = bake_or_refuse(capfd, out, no_input=True, extra_context=answers)
        if not writable(answers) or name is None or gpus is None:
            assert project is None, f"rendered {answers!r}"
        elif project is not None:
            assert_valid_render(project, description, author)
    finally:
        shutil.rmtree(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.fixed_dictionaries(
        {key: rarely(free_text, json_values, 10) for key in ("project_name", "description", "author_name")}
        | {"gpu_ids": rarely(gpu_ids, json_values, 10)}
    ),
    yes_no=st.dictionaries(st.sampled_from(TRICKS), rarely(st.booleans(), json_values, 5), max_size=3),
)
def test_any_replayed_values_refuse_cleanly_or_render_what_they_say(capfd, text, yes_no):
    """A replay file's values arrive as they are, of any JSON type."""
    answers = {key: value for key, value in CONTEXT.items() if key != "__prompts__"}
    answers |= {key: options[0] for key, options in CHOICES.items()} | {"project_slug": "fuzz", "package_name": "fuzz"}
    answers |= text | yes_no
    folder = Path(tempfile.mkdtemp())
    try:
        replay = folder / "replay.json"
        replay.write_text(json.dumps({"cookiecutter": answers}, ensure_ascii=True))
        project = bake_or_refuse(capfd, folder / "out", replay=str(replay))
        not_text = [key for key in text if not isinstance(answers[key], str)]
        not_yes_no = [key for key in yes_no if not isinstance(answers[key], bool)]
        if not writable(answers) or not_text or not_yes_no:
            assert project is None, f"rendered {answers!r}"
        elif project is not None:
            assert_valid_render(project, answers["description"], answers["author_name"])
            assert_files_exactly_for(project, features_on(answers))
    finally:
        shutil.rmtree(folder)

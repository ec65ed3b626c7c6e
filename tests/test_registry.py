"""The registry of tricks (tests/tricks.py) agrees with the template: an entry for every yes/no prompt and a prompt for
every entry, and the files, config keys and flags each entry names exist in the all-on render; its breakages are
entries of the mutation check, and the tricks it says need another are those the pre-generation hook refuses alone."""

import ast
import re
from pathlib import Path

import pytest
from render import YES_NO, baked_project, package_of, refused_by_the_hook, render_files
from runners import run_in
from test_mutations import MULTI_LABEL_RENDER, MUTATIONS
from tricks import (
    ENTRIES,
    MODEL_PARTS,
    MULTI_LABEL,
    NAMED,
    REGISTRY,
    SINGLE_LABEL_FILES,
    TRACKERS,
    TRACKING_FILES,
    TRICKS,
    smoke_flags,
)

BY_SHORT = {trick.short: trick for trick in ENTRIES}
each_entry = pytest.mark.parametrize("trick", ENTRIES, ids=[trick.short for trick in ENTRIES])


@pytest.fixture(scope="module")
def all_on(cookies_session) -> Path:
    return baked_project(cookies_session, **NAMED["all-on"])


@pytest.fixture(scope="module")
def train_help(all_on) -> str:
    """`python -m <package> train --help` of the all-on render (it answers without importing torch)."""
    return run_in(all_on, "-m", package_of(all_on), "train", "--help", timeout=60).stdout


def test_every_yes_no_prompt_has_an_entry_and_every_entry_a_prompt():
    no_entry = sorted(set(YES_NO) - {trick.prompt for trick in ENTRIES})
    assert not no_entry, f"yes/no prompts of cookiecutter.json without an entry in tests/tricks.py: {no_entry}"
    no_prompt = [trick.prompt or trick.short for trick in ENTRIES if trick.prompt not in YES_NO]
    assert not no_prompt, f"entries of tests/tricks.py without a yes/no prompt in cookiecutter.json: {no_prompt}"
    assert len(REGISTRY) == len(ENTRIES) and TRICKS == YES_NO, "a prompt with two entries"
    assert all(trick.short for trick in ENTRIES) and len(BY_SHORT) == len(ENTRIES), "short names must differ"


@each_entry
def test_each_entrys_files_are_in_the_all_on_render(trick, all_on):
    package = Path("src", package_of(all_on))
    missing = [path for path in trick.files if not (all_on / path.format(package=package)).is_file()]
    assert not missing, f"{trick.prompt}: the all-on render lacks {missing}"


def test_the_files_only_tricks_add_are_the_entries(all_on, cookies_session):
    """What the all-on render has and the all-off one lacks is exactly what the entries list: a trick's new file
    that no entry names fails here."""
    all_off = baked_project(cookies_session, **NAMED["all-off"])
    package = Path("src", package_of(all_on))
    listed = {str(Path(path.format(package=package))) for trick in ENTRIES for path in trick.files}
    listed |= {str(Path(path.format(package=package))) for path in TRACKING_FILES}  # all-on logs to a tracker
    added = set(render_files(all_on)) - set(render_files(all_off))
    assert added == listed, f"in no entry: {sorted(added - listed)}; named but not added: {sorted(listed - added)}"


def config_fields(project: Path) -> tuple[set[str], set[str]]:
    """(the fields of TrainConfig: config/'s BaseConfig and each feature's and trick's Options, those that config.yaml
    leaves out: PER_INVOCATION's and each Options' per_invocation)."""
    package = project / "src" / package_of(project)
    fields, per_invocation = set(), set()
    for path in [*sorted((package / "config").glob("*.py")), *sorted((package / "tricks").glob("*.py"))]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name in ("BaseConfig", "Options"):
                fields |= {item.target.id for item in node.body if isinstance(item, ast.AnnAssign)}
                per_invocation |= {
                    name
                    for item in node.body
                    if isinstance(item, ast.Assign)
                    and [getattr(t, "id", None) for t in item.targets] == ["per_invocation"]
                    for name in ast.literal_eval(item.value)
                }
            elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PER_INVOCATION"]:
                per_invocation |= set(ast.literal_eval(node.value))
    assert fields, "no BaseConfig in config/"
    return fields, per_invocation


@each_entry
def test_each_entrys_config_keys_are_fields_that_config_yaml_keeps(trick, all_on):
    fields, per_invocation = config_fields(all_on)
    assert set(trick.config_keys) <= fields, f"{trick.prompt}: not in config/: {set(trick.config_keys) - fields}"
    assert not set(trick.config_keys) & per_invocation, f"{trick.prompt}: config.yaml never keeps {per_invocation}"


@each_entry
def test_each_entrys_flags_are_options_of_train(trick, train_help):
    flags = {flag for model in MODEL_PARTS for flag in smoke_flags([trick.prompt], model) if flag.startswith("--")}
    flags |= {flag for flag in trick.then if flag.startswith("--")}
    missing = [flag for flag in sorted(flags) if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", train_help)]
    assert not missing, f"{trick.prompt}: the all-on render's `train --help` lacks {missing}"


@each_entry
def test_each_entry_names_its_breakages_in_the_mutation_check(trick):
    assert trick.breakages, f"{trick.prompt}: name the MUTATIONS entries (tests/test_mutations.py) that break it"
    unknown = [name for name in trick.breakages if name not in MUTATIONS]
    assert not unknown, f"{trick.prompt}: not in MUTATIONS of tests/test_mutations.py: {unknown}"
    assert len(set(trick.breakages)) == len(trick.breakages), f"{trick.prompt}: a breakage named twice"


@each_entry
def test_what_an_entry_needs_is_what_the_hook_refuses_it_without(trick):
    """With every other trick on, one switched off: the hook refuses the render because of this trick (it accepts it
    with this trick off too) exactly when this entry names that one as needed."""
    on = NAMED["all-on"]
    assert not refused_by_the_hook(**on)
    needed = [
        other
        for other in YES_NO
        if other != trick.prompt
        and refused_by_the_hook(**{**on, other: False})
        and not refused_by_the_hook(**{**on, other: False, trick.prompt: False})
    ]
    assert needed == ([trick.requires] if trick.requires else []), trick.prompt
    assert bool(trick.refusal) == bool(trick.requires), f"{trick.prompt}: the hook's message goes with `requires`"


@pytest.mark.parametrize("tracker", TRACKERS, ids=[tracker.short for tracker in TRACKERS])
def test_each_tracker_entry_names_its_config_keys_and_breakages(tracker, cookies_session):
    value = tracker.prompt.removeprefix("tracker=")
    project = baked_project(cookies_session, **(NAMED["all-on"] | {"tracker": value}))
    fields, per_invocation = config_fields(project)
    assert set(tracker.config_keys) <= fields - per_invocation, f"{value}: {set(tracker.config_keys) - fields}"
    assert tracker.breakages and all(name in MUTATIONS for name in tracker.breakages), tracker.breakages
    assert all(MUTATIONS[name][4] == value for name in tracker.breakages), "a breakage applied to another tracker"


def test_the_multi_label_entry_names_its_files_config_keys_and_breakages(all_on, cookies_session):
    """What the multi-label render adds to all-on and drops from it is what the entry and SINGLE_LABEL_FILES list."""
    project = baked_project(cookies_session, **NAMED["multi-label"])
    package = Path("src", package_of(project))
    listed = {str(Path(path.format(package=package))) for path in MULTI_LABEL.files}
    files, all_on_files = set(render_files(project)), set(render_files(all_on))
    assert (files - all_on_files, all_on_files - files) == (listed, set(SINGLE_LABEL_FILES))
    fields, per_invocation = config_fields(project)
    assert set(MULTI_LABEL.config_keys) <= fields - per_invocation
    assert MULTI_LABEL.breakages and all(MUTATIONS[name][4] == MULTI_LABEL_RENDER for name in MULTI_LABEL.breakages)

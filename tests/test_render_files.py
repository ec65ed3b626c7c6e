"""The files of the named renders (defaults, all-on, all-off) are the ones recorded in tests/render_files.json: a change
to the template or its hooks that adds or drops a file shows here. The files of the yes/no tricks are their entries' in
tests/tricks.py (tests/test_registry.py checks those against the renders), so that a new trick needs no edit here."""

import json
from pathlib import Path

import pytest
from render import baked_project, package_of, render_files
from tricks import ENTRIES, NAMED

RECORD = Path(__file__).with_name("render_files.json")


@pytest.mark.parametrize("name", NAMED)
def test_a_named_render_has_the_recorded_files(name, cookies):
    recorded = json.loads(RECORD.read_text())[name]
    project = baked_project(cookies, **NAMED[name])
    package = Path("src", package_of(project))
    tricks_own = {str(Path(path.format(package=package))) for trick in ENTRIES for path in trick.files}
    files = [file for file in render_files(project) if file not in tricks_own]
    added, dropped = sorted(set(files) - set(recorded)), sorted(set(recorded) - set(files))
    assert files == recorded, (
        f"the {name} render added {added} and dropped {dropped}. A change must not add or drop files by accident; if "
        f"it is meant, update the record deliberately: add or remove those paths under {name!r} in tests/{RECORD.name}"
    )

"""The files of the named renders (defaults, all-on, all-off) are the ones recorded in tests/render_files.json: a change
to the template or its hooks that adds or drops a file shows here."""

import json
from pathlib import Path

import pytest
from render import baked_project, render_files
from tricks import NAMED

RECORD = Path(__file__).with_name("render_files.json")


@pytest.mark.parametrize("name", NAMED)
def test_a_named_render_has_the_recorded_files(name, cookies):
    recorded = json.loads(RECORD.read_text())[name]
    files = render_files(baked_project(cookies, **NAMED[name]))
    added, dropped = sorted(set(files) - set(recorded)), sorted(set(recorded) - set(files))
    assert files == recorded, (
        f"the {name} render added {added} and dropped {dropped}. A change must not add or drop files by accident; if "
        f"it is meant, update the record deliberately: add or remove those paths under {name!r} in tests/{RECORD.name}"
    )

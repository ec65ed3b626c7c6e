#!/usr/bin/env bash
# The template's whole test suite. Extra arguments go to pytest (e.g. -m "not slow").
export SUITE_STARTED="${SUITE_STARTED:-$(date +%s)}"  # the time table at the end counts the set-up too
source "$(dirname "$0")/setup.sh"
# pytest exits 5 when it collected no tests: that is a failure here too, and set -e passes it on.
.venv/bin/python -m pytest -n 2 --dist worksteal "$@"

#!/usr/bin/env bash
# Render the template with its default answers, install the result, and train it on the synthetic data.
source "$(dirname "$0")/setup.sh"
rm -rf build/demo
.venv/bin/cookiecutter --no-input --output-dir build/demo .
.venv/bin/python -m pip install --quiet -e build/demo/my-project
.venv/bin/my-project train --output-dir build/demo/run

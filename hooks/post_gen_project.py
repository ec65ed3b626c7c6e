"""Remove the files of features that are off, from one declarative table.

Standard library only. Paths are relative to the generated project; `{package}` is the package folder.
"""

import json
import shutil
from pathlib import Path

CTX = json.loads(r"""{{ cookiecutter | tojson }}""")

# feature (a boolean answer) -> files that exist only when it is on
FEATURE_FILES: dict[str, list[str]] = {}


def main() -> None:
    package = Path("src", CTX["package_name"])
    for feature, paths in FEATURE_FILES.items():
        if CTX[feature]:
            continue
        for path in paths:
            target = Path(path.format(package=package))
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)


if __name__ == "__main__":
    main()

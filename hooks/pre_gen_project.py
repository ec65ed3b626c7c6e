"""Refuse bad answers before anything is written: one `ERROR:` line, exit status 1.

Answers that fail before this hook runs are refused earlier, in local_extensions: a project_slug that is no plain
folder name (or is too long for one), where the folder name is rendered, since cookiecutter creates that folder
before this hook runs; a project_name that is not text, where the slug is derived from it; an `_extensions` list
that is not the template's, where Jinja loads it.

Standard library only: hooks run with cookiecutter's own interpreter. The answers arrive as JSON data,
never pasted into code, so any text is safe here.
"""

import json
import keyword
import re
import sys

CTX = json.loads(r"""{{ cookiecutter | tojson }}""")
# The template's own prompts (local_extensions): a replay file or --extra-context can set any value.
CHOICES = json.loads(r"""{{ template_choices | tojson }}""")
YES_NO = json.loads(r"""{{ template_yes_no | tojson }}""")
TEXT = json.loads(r"""{{ template_text | tojson }}""")
EXTENSIONS = json.loads(r"""{{ template_extensions | tojson }}""")

# Names a generated package must not take: importing it would shadow the real module.
DEPENDENCIES = {"torch", "torchvision", "torchinfo", "tqdm", "yaml", "numpy", "PIL", "pytest", "setuptools"}
SHADOWED = set(sys.stdlib_module_names) | DEPENDENCIES | {"test", "tests", "src"}
SLUG = re.compile(r"[a-z][a-z0-9]*([-_][a-z0-9]+)*")
PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
GPU_IDS = re.compile(r"\d+(,\d+)*")
EXAMPLES = {
    "project_name": "'Flower Classifier'",
    "project_slug": "'flower-classifier'",
    "package_name": "'flower_classifier'",
    "gpu_ids": "'0', '0,1' or 'cpu'",
}
# Paths of this machine that cookiecutter adds (the output folder's name is the user's, whatever its bytes).
MACHINE_KEYS = {"_template", "_output_dir", "_repo_dir", "_checkout"}


def unwritable(value, where: str):
    """The first place in an answer (nested in lists and objects) holding text that UTF-8 cannot encode,
    such as a lone surrogate from a replay file's "\\ud800": no file could hold it."""
    texts = [value] if isinstance(value, str) else []
    if isinstance(value, dict):
        texts = list(value)
        items = [(f"{where}.{key}", item) for key, item in value.items()]
    else:
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)] if isinstance(value, list) else []
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return where, text
    return next(filter(None, (unwritable(item, place) for place, item in items)), None)


def shown(value) -> str:
    """A non-text answer as a replay file or --extra-context spells it."""
    return json.dumps(value)[:60]


def type_problems(ctx: dict):
    """Answers that are not what their prompt gives: text that no file can hold, a list of extensions that is not
    the template's, a non-text answer to a text prompt, anything but true/false to a yes/no prompt."""
    for key, value in ctx.items():
        found = None if key in MACHINE_KEYS else unwritable(key, "the key") or unwritable(value, key)
        if found:
            yield (
                f"{found[0]} {found[1][:60]!r} holds a character that UTF-8 cannot encode (a lone surrogate "
                "such as \\ud800); retype it"
            )
    listed = ctx.get("_extensions", EXTENSIONS)  # where cookiecutter has not refused it (local_extensions)
    foreign = [str(name) for name in listed if str(name) not in EXTENSIONS] if isinstance(listed, list) else [listed]
    if foreign:
        yield (
            f"_extensions lists {', '.join(map(str, foreign))[:80]}, which this template does not use: remove the "
            "_extensions key from the replay file (the template's own list is used)"
        )
    for key in TEXT:
        if key in ctx and not isinstance(ctx[key], str):
            example = EXAMPLES.get(key)
            yield f"{key} must be text (a string){f', e.g. {example}' if example else ''}, not {shown(ctx[key])}"
    for key in YES_NO:
        if key in ctx and not isinstance(ctx[key], bool):
            yield f"{key} {shown(ctx[key])} is not a yes/no answer: answer true or false (yes or no at the prompt)"


def problems(ctx: dict):
    """Yield one sentence per bad answer: what is wrong and how to fix it."""
    yield from type_problems(ctx)
    for key, options in CHOICES.items():
        if ctx.get(key) not in options:
            yield f"{key} {str(ctx.get(key))[:60]!r} is not one of the choices: {', '.join(options)}; pick one of them"
    if not ctx["project_name"].strip():
        yield "project_name is empty; give the project a name, e.g. 'Flower Classifier'"
    slug = ctx["project_slug"]
    if not SLUG.fullmatch(slug):
        yield (
            f"project_slug {slug!r} (the folder name, derived from the project name unless given) must be "
            "lower-case letters, digits and single - or _ separators, starting with a letter; e.g. 'flower-classifier'"
        )
    package = ctx["package_name"]
    if not PACKAGE.fullmatch(package) or keyword.iskeyword(package):
        yield f"package_name {package!r} is not a lower-case Python identifier; e.g. 'flower_classifier'"
    elif len(package) > 40:
        yield f"package_name {package!r} is longer than 40 characters; it must be at most 40 characters"
    elif package in SHADOWED:
        yield f"package_name {package!r} would shadow the module of that name; pick another, e.g. '{package}_cls'"
    gpu_ids = ctx["gpu_ids"].replace(" ", "")
    if gpu_ids.lower() in ("cpu", "none"):
        pass  # CPU only, as an empty answer
    elif gpu_ids and not GPU_IDS.fullmatch(gpu_ids):
        yield f"gpu_ids {ctx['gpu_ids']!r} must be comma-separated GPU numbers such as '0' or '0,1', or cpu"
    elif gpu_ids and len(set(gpu_ids.split(","))) < len(gpu_ids.split(",")):
        yield f"gpu_ids {ctx['gpu_ids']!r} lists a GPU twice; list each id once"
    if ctx["use_sync_bn"] and not ctx["use_distributed"]:
        yield (
            "use_sync_bn synchronises BatchNorm across the processes of a multi-GPU job, so it needs "
            "use_distributed; answer yes to use_distributed or no to use_sync_bn"
        )


def main() -> int:
    problem = next(problems(CTX), None)  # the first problem only: one line to read and fix
    if problem:
        print(f"ERROR: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

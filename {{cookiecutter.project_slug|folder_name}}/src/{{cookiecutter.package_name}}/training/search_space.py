{% set ddp = cookiecutter.use_distributed %}
"""The search space of `tune`: a YAML file of train options, each a list of choices or a low/high range, read into
Optuna's distributions; every choice is checked as a config before the first trial starts."""

import decimal
import math
import re
from pathlib import Path

import yaml

from ..config import FIELDS, PER_INVOCATION, TYPES, TrainConfig, base_type, coerce
from ..core.errors import UserError, one_line

{% if ddp %}
RUN_WHERE = {"output_dir", "device", "gpus", "num_workers", "nproc", "dist_timeout"}  # may change when a search goes on
{% else %}
RUN_WHERE = {"output_dir", "device", "gpus", "num_workers"}  # may change when a search goes on
{% endif %}
NOT_SEARCHED = RUN_WHERE - {"num_workers"} | PER_INVOCATION  # where and how trials run, not what they try


def optuna_module():
    """Optuna, or one line naming the extra that installs it."""
    try:
        import optuna
    except ImportError:
        raise UserError('tune needs Optuna: pip install -e ".[tune]"') from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the table at the end says what happened
    return optuna


def load_space(path: str) -> dict:
    """The search space file: train option -> a list of choices, or {low, high[, log][, step]} for a range."""
    optuna = optuna_module()
    try:
        spec = yaml.load(Path(path).read_text(encoding="utf-8"), _SpaceLoader)  # safe_load's loader, keys checked
    except OSError as exc:
        raise UserError(f"cannot read search space {path}: {exc.strerror}; check --space") from None
    except (UnicodeDecodeError, yaml.YAMLError):
        raise UserError(f"search space {path} is not valid YAML text; fix its syntax") from None
    except _KeyTwice as twice:
        key, (first, second) = twice.args
        lines = f"lines {first} and {second}" if first != second else f"line {first}"
        raise UserError(f"search space {path}: {key} is given twice ({lines}); keep one") from None
    if not isinstance(spec, dict) or not spec:
        raise UserError(f"search space {path} must map train options to a list of choices or a low/high range")
    space = {}
    for name, values in spec.items():
        where = f"search space {path}: {name}"
        if name not in FIELDS or name in NOT_SEARCHED:
            searchable = ", ".join(field for field in FIELDS if field not in NOT_SEARCHED)
            raise UserError(f"{where} is no option a trial can vary; use some of: {searchable}")
        kind = base_type(TYPES[name])
        if isinstance(values, list):
            if not values or len(set(map(repr, values))) != len(values):
                raise UserError(f"{where} must list different choices, got {values!r}")
            _check_values(name, values, where)
            space[name] = optuna.distributions.CategoricalDistribution(values)
        elif isinstance(values, dict) and kind in (int, float):
            space[name] = _range(optuna, name, kind, values, where)
        else:
            ranged = " or a low/high range" if kind in (int, float) else ""
            raise UserError(f"{where} must be a list of choices{ranged}")
    return space


class _KeyTwice(Exception):
    """A key given twice in one mapping of the space: (key, (first line, second line))."""


class _SpaceLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice: YAML keeps the last one silently, and the user meant one of them."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden, that is what it is for
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _KeyTwice(key, (seen[key], line))
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


# a number with an exponent that YAML 1.1 reads as text: it wants a dot and a signed exponent (1.0e+300, not 1e300)
TEXT_NUMBER = re.compile(r"([-+]?(?:\d+\.?\d*|\.\d+))[eE]([-+]?)(\d+)")


def _read_as_text(value, where: str, what: str) -> None:
    if isinstance(value, str) and (number := TEXT_NUMBER.fullmatch(value.strip())):
        mantissa, sign, exponent = number.groups()
        written = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{sign or '+'}{exponent}"
        raise UserError(f"{where}: {what} {value} is read as text, not a number; write it as {written}")


def _check_values(name: str, values: list, where: str) -> None:
    """Every choice must make a valid config: the trial fails at its start otherwise."""
    for value in values:
        if base_type(TYPES[name]) in (int, float):
            _read_as_text(value, where, "the choice")
        try:
            TrainConfig(**{name: coerce(name, value)})
        except UserError as exc:
            raise UserError(f"{where}: the choice {value!r} is not valid ({one_line(exc)})") from None


def _range(optuna, name: str, kind: type, values: dict, where: str):
    unknown = sorted(set(values) - {"low", "high", "log", "step"})
    numbers = [values.get("low"), values.get("high"), *([values["step"]] if "step" in values else [])]
    for key in ("low", "high", "step"):
        _read_as_text(values.get(key), where, key)
    if unknown or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
        raise UserError(f"{where} must be a range: low and high numbers, and log: true or a step number if wanted")
    low, high, log, step = values["low"], values["high"], values.get("log", False), values.get("step")
    if not (math.isfinite(low) and math.isfinite(high) and low < high) or (log and low <= 0) or (step and log):
        raise UserError(f"{where} needs finite low < high (low > 0 with log: true; log and step do not mix)")
    if not isinstance(log, bool) or (step is not None and not 0 < step <= high - low):
        raise UserError(f"{where}: log must be true or false, and a step a number between 0 and high - low")
    if kind is int:
        if not all(float(v).is_integer() for v in numbers):
            raise UserError(f"{where} takes whole numbers")
        distribution = optuna.distributions.IntDistribution(int(low), int(high), log=log, step=int(step or 1))
    else:
        try:
            distribution = optuna.distributions.FloatDistribution(float(low), float(high), log=log, step=step)
        except decimal.InvalidOperation:  # Optuna checks the grid in 28-digit decimals: too many steps for them
            raise UserError(f"{where}: step {step} is too small for {low} to {high}; use a larger step") from None
    _check_values(name, [kind(low), kind(high)], where)
    return distribution

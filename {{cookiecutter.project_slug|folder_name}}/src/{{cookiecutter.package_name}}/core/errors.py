"""The exceptions the command line turns into one plain line on stderr and a distinct exit code."""

import pickle


class UserError(Exception):
    """A mistake the user can fix: the message says what is wrong and what to do."""

    exit_code = 2  # a bad flag, config file or combination of options


class DataError(UserError):
    exit_code = 3  # data missing, laid out wrongly or unreadable


class ModelError(UserError):
    exit_code = 4  # a model name, weights file or checkpoint that does not fit


class OutputError(UserError):
    exit_code = 5  # the output dir cannot be written, or holds a finished run


class DeviceError(UserError):
    exit_code = 6  # the device or precision asked for is not available here


class TrainingDiverged(UserError):
    exit_code = 7  # the loss became NaN or infinite


def one_line(exc: UserError) -> str:
    """The message alone, also when a DataLoader worker raised it (PyTorch then adds the worker's traceback)."""
    message = str(exc).strip()
    return message.splitlines()[-1].split(": ", 1)[-1] if "Original Traceback" in message else message


def first_line(exc: BaseException) -> str:
    """An exception's first line, or its type where it has no message (an empty file's EOFError)."""
    return (str(exc).strip() or type(exc).__name__).splitlines()[0]


def load_failure(exc: BaseException) -> str:
    """Why torch.load refused a file, in a few words; for a file of pickled objects, not PyTorch's advice to load it
    with weights_only=False, which would run whatever code the file holds."""
    if isinstance(exc, pickle.UnpicklingError) and "weights_only" in str(exc):
        return "it holds Python objects besides tensors and plain data, and loading those could run code"
    return first_line(exc)


def state_dict_mismatch(exc: RuntimeError) -> str:
    """load_state_dict's error on one line: its first line names only the class, the mismatches follow it."""
    return " ".join(str(exc).split("\n", 1)[-1].split())[:300]

"""The exceptions the command line turns into one plain line on stderr and a distinct exit code."""


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

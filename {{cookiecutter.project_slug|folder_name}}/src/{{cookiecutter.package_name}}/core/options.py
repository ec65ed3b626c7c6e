"""How a configuration field is declared: its default, and the help and argparse settings of its flag."""

from dataclasses import field


def option(default, help, **argparse_kwargs):
    return field(default=default, metadata={"help": help, **argparse_kwargs})

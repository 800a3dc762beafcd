"""``python -m tritonforge`` is the CLI."""

from .cli import entry

entry()

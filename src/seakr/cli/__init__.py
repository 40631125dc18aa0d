"""The ``seakr`` command: :func:`~seakr.cli.main.main` reads the flags (``args``), runs one command
(``commands``, ``studies``) and says every failure in one line (``shell``)."""

from .main import main

__all__ = ["main"]

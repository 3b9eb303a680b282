"""The command running now, for the provenance a stage writes (each run's ir_metadata record names the command that
made it: ``implementation.executable.cmd``, longrank.results.run_metadata.command). A module of its own, imported by
the command line and the record alike, so that neither imports the other."""

from __future__ import annotations

#: the arguments of the stage running now (``<stage> ...``), as longrank.cli.main received them; None outside it
argv: list[str] | None = None

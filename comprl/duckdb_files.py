"""Opening DuckDB databases without reaching the network: every connection the kit opens goes through
:func:`connect`.

DuckDB installs a known extension from its web site the moment a database needs one it lacks, by default: a
SQLite file handed over as a bank or a run's ``run.duckdb`` made it download ``sqlite_scanner``, and a file can ask
for others. The kit loads the extensions it uses from their PyPI wheels itself
(the bank loads ``vss`` from the wheel ``duckdb-extension-vss``), so its connections turn that download off; an
extension already installed on the machine still loads. A file that needs one that is not there is refused with
DuckDB's own error ("Extension ... not found"), which the callers wrap in one naming the user's file.
"""

from __future__ import annotations

import duckdb

OFFLINE = {"autoinstall_known_extensions": False}
"""DuckDB settings of every connection the kit opens: no extension is downloaded."""


def connect(database: str = ":memory:", read_only: bool = False, **config: object) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect(database, read_only=read_only)`` with :data:`OFFLINE` and any further settings."""
    return duckdb.connect(database, read_only=read_only, config={**OFFLINE, **config})

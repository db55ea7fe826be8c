"""Bring data sets in as task folders: ``import_rows`` with a preset or a column mapping."""

from verify_cli.importers.model import RowError, RowFailure, TaskDraft
from verify_cli.importers.presets import PRESETS, Preset
from verify_cli.importers.run import ImportReport, ImportStopped, import_rows, parse_mapping

__all__ = ["PRESETS", "ImportReport", "ImportStopped", "Preset", "RowError", "RowFailure", "TaskDraft",
           "import_rows", "parse_mapping"]

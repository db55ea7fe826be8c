"""Bring data sets in as task folders: ``import_rows`` with a preset or a column mapping."""

from verify_cli.importers.model import RowError, RowFailure, TaskDraft
from verify_cli.importers.presets import PRESETS, Preset
from verify_cli.importers.run import ImportReport, ImportStopped, humaneval_data_file, import_rows, parse_mapping
from verify_cli.importers.sources import read_rows

__all__ = ["PRESETS", "ImportReport", "ImportStopped", "Preset", "RowError", "RowFailure", "TaskDraft",
           "humaneval_data_file", "import_rows", "parse_mapping", "read_rows"]

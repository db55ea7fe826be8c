"""Take task sets out: verl Parquet, generic JSONL, ``datasets`` folders."""

from verify_cli.exporters.run import ExportFormat, ExportReport, export_tasks

__all__ = ["ExportFormat", "ExportReport", "export_tasks"]

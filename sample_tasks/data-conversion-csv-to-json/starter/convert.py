"""CSV to JSON records validated against a JSON Schema subset. See prompt.md."""

import json


def convert(csv_text, schema):
    """Return {"records": [...], "errors": [...]}. See prompt.md."""
    raise NotImplementedError


def convert_file(csv_path, schema_path, out_path):
    """Convert a CSV file with a JSON schema file and write the JSON result. See prompt.md."""
    raise NotImplementedError

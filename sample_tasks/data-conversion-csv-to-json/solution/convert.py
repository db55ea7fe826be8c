"""CSV to JSON records validated against a JSON Schema subset. See prompt.md."""

import csv
import io
import json
import re

_INTEGER = re.compile(r"[+-]?\d+\Z")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")


def _coerce(text, kind):
    """(value, None) or (None, 'type')."""
    if kind == "integer":
        return (int(text), None) if _INTEGER.match(text) else (None, "type")
    if kind == "number":
        return (float(text), None) if _NUMBER.match(text) else (None, "type")
    if kind == "boolean":
        low = text.lower()
        return (low == "true", None) if low in ("true", "false") else (None, "type")
    return text, None


def _check(value, spec):
    """The first failing constraint code, or None."""
    if "enum" in spec and value not in spec["enum"]:
        return "enum"
    if spec.get("type") in ("integer", "number"):
        if "minimum" in spec and value < spec["minimum"]:
            return "minimum"
        if "maximum" in spec and value > spec["maximum"]:
            return "maximum"
    if spec.get("type") == "string":
        if "minLength" in spec and len(value) < spec["minLength"]:
            return "minLength"
        if "maxLength" in spec and len(value) > spec["maxLength"]:
            return "maxLength"
    return None


def convert(csv_text, schema):
    """Return {"records": [...], "errors": [...]}. See prompt.md."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    allow_extra = schema.get("additionalProperties", True) is not False
    rows = [row for row in csv.reader(io.StringIO(csv_text)) if row]
    records, errors = [], []
    if not rows:
        return {"records": records, "errors": errors}
    header = [h.strip() for h in rows[0]]
    columns = []  # (index, name, spec or None)
    for i, name in enumerate(header):
        if name in properties:
            columns.append((i, name, properties[name]))
        elif allow_extra:
            columns.append((i, name, None))
        else:
            errors.append({"row": 0, "field": name, "error": "unknown-column"})
    for number, row in enumerate(rows[1:], start=1):
        if len(row) != len(header):
            errors.append({"row": number, "field": None, "error": "field-count"})
            continue
        record, row_errors = {}, {}
        for i, name, spec in columns:
            cell = row[i].strip()
            if cell == "":
                continue
            if spec is None:
                record[name] = cell
                continue
            value, problem = _coerce(cell, spec.get("type", "string"))
            if problem is None:
                problem = _check(value, spec)
            if problem is None:
                record[name] = value
            else:
                row_errors[name] = problem
        for name in required:
            if name not in record and name not in row_errors:
                row_errors[name] = "required"
        if row_errors:
            errors.extend({"row": number, "field": f, "error": row_errors[f]} for f in sorted(row_errors))
        else:
            records.append(record)
    return {"records": records, "errors": errors}


def convert_file(csv_path, schema_path, out_path):
    """Convert a CSV file with a JSON schema file and write the JSON result. See prompt.md."""
    with open(csv_path, encoding="utf-8", newline="") as f:
        text = f.read()
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    result = convert(text, schema)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return result

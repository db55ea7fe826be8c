"""Hostile programs of the sandbox conformance suite, one attack per file.

Each file is a script run as ``python <file> <token>`` inside a sandbox by
:mod:`verify_cli.sandbox.kit.conformance`; importing a module here runs nothing. A program reports
what it managed to do on stdout (one JSON object where there is something to report), but the
conformance checks judge containment from the host side wherever they can.
"""

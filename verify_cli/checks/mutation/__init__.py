"""Mutant generation for ``verify-cli audit``: source files in, small located changes out.

Grading the mutants against a task's tests is done elsewhere; nothing here runs code.
"""

from verify_cli.checks.mutation.generate import LANGUAGES, generate_mutants, operator_names
from verify_cli.checks.mutation.js_ops import JS_OPERATORS
from verify_cli.checks.mutation.model import Mutant, MutantSet
from verify_cli.checks.mutation.python_ops import PYTHON_OPERATORS

__all__ = [
    "JS_OPERATORS",
    "LANGUAGES",
    "PYTHON_OPERATORS",
    "Mutant",
    "MutantSet",
    "generate_mutants",
    "operator_names",
]

"""Task folders: the format, loading and validation. Knows nothing about sandboxes."""

from verify_cli.tasks.loader import TaskLoadFailure, discover_task_dirs, load_task, load_task_set
from verify_cli.tasks.model import Environment, Isolation, Scoring, ScoringPolicy, Task, TaskLimits, TestSpec
from verify_cli.tasks.repository import RepositorySpec

__all__ = ["Environment", "Isolation", "RepositorySpec", "Scoring", "ScoringPolicy", "Task", "TaskLimits",
           "TaskLoadFailure", "TestSpec", "discover_task_dirs", "load_task", "load_task_set"]

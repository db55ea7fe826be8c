"""Task environments: what a task declares it needs (task.toml ``[environment]``), built once per
machine, content-addressed, pinned, and handed to the sandboxes as an image (docker) or a
read-only venv layer (bwrap, process). A layer of its own, above the backends and below the
grader (docs/environments.md)."""

from verify_cli.environments.realise import IMAGE, PREFIX, Environments, Realised, form_for
from verify_cli.environments.spec import EnvironmentSpec, spec_of
from verify_cli.environments.store import EnvironmentStore, StoredEnvironment, default_store_dir

__all__ = ["IMAGE", "PREFIX", "EnvironmentSpec", "EnvironmentStore", "Environments", "Realised",
           "StoredEnvironment", "default_store_dir", "form_for", "spec_of"]

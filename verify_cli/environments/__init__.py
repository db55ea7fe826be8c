"""Task environments: what a task declares it needs (task.toml ``[environment]``), built once per
machine, content-addressed, pinned, and handed to the sandboxes as an image (docker) or a
read-only venv layer (bwrap, process), or, where a declaration needs an image, the image's root
file system exported for bwrap. A layer of its own, above the backends and below the
grader (docs/environments.md)."""

from verify_cli.environments.realise import IMAGE, PREFIX, ROOTFS, Environments, Realised, form_for
from verify_cli.environments.spec import EnvironmentSpec, spec_of
from verify_cli.environments.store import EnvironmentStore, StoredEnvironment, default_store_dir

__all__ = ["IMAGE", "PREFIX", "ROOTFS", "EnvironmentSpec", "EnvironmentStore", "Environments", "Realised",
           "StoredEnvironment", "default_store_dir", "form_for", "spec_of"]

"""``verify-cli env ...``: build, list and prune the tasks' environments (docs/environments.md)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Annotated, Any

import typer

from verify_cli.cli import console
from verify_cli.cli.options import SandboxOpt
from verify_cli.environments import Environments, EnvironmentStore, spec_of
from verify_cli.errors import EnvironmentBuildError, ExitCode, UsageError
from verify_cli.report.files import write_json
from verify_cli.sandbox.registry import resolve_backend_name, sandbox_class
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

env_app = typer.Typer(help="Build, list and prune task environments.", no_args_is_help=True)

StoreOpt = Annotated[Path | None, typer.Option(
    "--store", help="Environment store (default: $VERIFY_CLI_ENV_DIR or ~/.cache/verify-cli/environments).")]
JsonOpt = Annotated[str | None, typer.Option("--json", help="Write the result as JSON (- for stdout).")]


def _tasks(path: Path) -> list[Task]:
    items = list(load_task_set(path))
    tasks = [t for t in items if isinstance(t, Task)]
    for bad in (t for t in items if not isinstance(t, Task)):
        console.warning(f"skipped: {bad.error}")
    return tasks


@env_app.command("build")
def build_command(
    path: Annotated[Path, typer.Argument(help="A task folder, or a folder of task folders.")],
    sandbox: SandboxOpt = "auto",
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Environments built at once.")] = 2,
    store: StoreOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Build the environments the tasks declare, once each, for a sandbox backend."""
    name, fallback = resolve_backend_name(sandbox)
    if fallback:
        console.warning(fallback)
    envs = Environments(sandbox_class(name), EnvironmentStore(store))
    by_spec: dict[str, list[Task]] = {}
    specs = {}
    for task in _tasks(path):
        spec = spec_of(task)
        if spec is not None:
            by_spec.setdefault(spec.digest, []).append(task)
            specs[spec.digest] = spec
    rows: list[dict[str, Any]] = []

    def build(digest: str) -> dict[str, Any]:
        tasks = by_spec[digest]
        t0 = time.monotonic()
        row: dict[str, Any] = {"tasks": [t.id for t in tasks], "form": envs.form_of(specs[digest])}
        try:
            realised = envs.realise_spec(specs[digest])
            where = realised.image or (realised.layer.root or "" if realised.layer else "")
            row.update(identity=realised.identity, status="built" if realised.built else "cached",
                       image=where, seconds=round(time.monotonic() - t0, 2))
        except EnvironmentBuildError as e:
            row.update(identity=e.identity, status="failed", cause=e.cause, log=e.log,
                       seconds=round(time.monotonic() - t0, 2))
        return row

    with console.progress_bar("building environments", len(by_spec)) as advance, \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        for fut in as_completed([pool.submit(build, d) for d in by_spec]):
            row = fut.result()
            rows.append(row)
            advance(f"{row['identity']} {row['status']}")
    envs.close()
    rows.sort(key=lambda r: r["tasks"][0])
    if json_out:
        write_json(json_out, {"backend": name, "environments": rows})
    if json_out != "-":
        console.environment_builds(rows, backend=name, tasks_without=0)
    if any(r["status"] == "failed" for r in rows):
        raise typer.Exit(ExitCode.DEFECTIVE)


@env_app.command("list")
def list_command(store: StoreOpt = None, json_out: JsonOpt = None) -> None:
    """The environments in the store: identity, form, size, age, and what declared them."""
    entries = EnvironmentStore(store).entries()
    rows = [{"identity": e.identity, "form": e.form, "bytes": e.bytes, "built_at": e.manifest.get("built_at"),
             "image": e.manifest.get("image", ""), "packages": e.manifest.get("packages", []),
             "spec": e.manifest.get("spec", {})} for e in entries]
    if json_out:
        write_json(json_out, {"environments": rows})
    if json_out != "-":
        console.environment_list(rows)


@env_app.command("prune")
def prune_command(
    keep: Annotated[Path | None, typer.Option(
        "--keep", help="Keep the environments the tasks under this folder use (for every backend).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Remove every environment.")] = False,
    older_than: Annotated[float | None, typer.Option(
        "--older-than", min=0, help="Remove those built more than this many days ago.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove nothing.")] = False,
    store: StoreOpt = None,
) -> None:
    """Remove built environments (their folders and images) from the store."""
    if not (all_ or keep or older_than is not None):
        raise UsageError("say what to prune", hint="--all, --keep TASKS, or --older-than DAYS")
    st = EnvironmentStore(store)
    keep_specs = {s.id for t in _tasks(keep) if (s := spec_of(t)) is not None} if keep else set()
    now = time.time()
    removed = []
    for e in st.entries():
        if keep is not None and e.manifest.get("spec_id") in keep_specs:
            continue
        if older_than is not None and now - float(e.manifest.get("built_at", now)) < older_than * 86400:
            continue
        removed.append(e)
    for e in removed:
        if not dry_run:
            _remove_image(e.manifest.get("image"))
            st.remove(e.identity)
    console.plain(f"{'would remove' if dry_run else 'removed'} {len(removed)} environment(s)"
                  + "".join(f"\n  {e.identity} ({e.form})" for e in removed))


def _remove_image(image: object) -> None:
    if not image:
        return
    try:
        from verify_cli.environments.image import docker_client

        docker_client().images.remove(str(image), force=True)
    except Exception as e:  # the engine may be down or the image gone: the folder still goes
        console.warning(f"image {image} not removed: {e}")

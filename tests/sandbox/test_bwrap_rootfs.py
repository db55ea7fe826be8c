"""bwrap over a root file system of the run's own (verify_cli/sandbox/bwrap/rootfs.py): which of
the root's entries a sandbox shows, programs found inside the root (never on the host), and an
exported root's mount points made without following its links onto the host."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from verify_cli.sandbox.bwrap.rootfs import file_in_root, prepare_root, root_view_args, which_in_root


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for d in ("usr/bin", "usr/lib", "etc", "opt", "proc", "tmp", "workspace"):
        (root / d).mkdir(parents=True)
    os.symlink("usr/bin", root / "bin")
    (root / "usr/bin/python3.11").write_text("#!\n")
    os.symlink("python3.11", root / "usr/bin/python3")
    os.symlink("/usr/bin/python3", root / "usr/bin/python")  # absolute: inside the root, not the host's
    return root


def test_the_view_binds_the_roots_folders_and_links_but_never_the_sandboxs_own(tmp_path: Path) -> None:
    root = _root(tmp_path)
    argv = root_view_args(str(root))
    at = argv.index("--symlink")
    assert argv[at:at + 3] == ["--symlink", "usr/bin", "/bin"]
    for name in ("etc", "opt", "usr"):
        assert f"{root}/{name}" in argv and f"/{name}" in argv
    for own in ("proc", "tmp", "workspace"):
        assert f"/{own}" not in argv
    nested = root_view_args(str(root), source="/")
    at = nested.index("/usr")
    assert nested[at - 1:at + 2] == ["--ro-bind", "/usr", "/usr"] and "//usr" not in nested


def test_programs_are_found_inside_the_root_through_its_own_links(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert file_in_root(root, "/usr/bin/python") == root / "usr/bin/python3.11"
    assert file_in_root(root, "/bin/python3") == root / "usr/bin/python3.11"
    assert which_in_root(str(root), "python3", "/usr/local/bin:/usr/bin:/bin") == "/usr/bin/python3"
    assert which_in_root(str(root), "node", "/usr/local/bin:/usr/bin:/bin") is None
    os.symlink("/" + str(tmp_path).strip("/") + "/host-only", root / "usr/bin/escape")
    (tmp_path / "host-only").write_text("host\n")
    assert file_in_root(root, "/usr/bin/escape") is None  # a host path is not the root's


def test_mount_points_are_made_but_never_through_a_link_onto_the_host(tmp_path: Path) -> None:
    root = _root(tmp_path)
    prepare_root(root)
    assert (root / "opt/verify-harness").is_dir() and (root / "etc/hosts").is_file()
    evil = tmp_path / "evil"
    (evil / "root").mkdir(parents=True)
    os.symlink(str(tmp_path / "host-opt"), evil / "root" / "opt")
    with pytest.raises(ValueError, match="/opt is a symbolic link"):
        prepare_root(evil / "root")
    assert not (tmp_path / "host-opt").exists()


def test_the_candidates_view_over_a_root_covers_the_harness_its_opt_carries(tmp_path: Path) -> None:
    """The run's harness is mounted under the root's /opt; the candidate's nested sandbox binds
    that /opt, so it covers the harness (absent from its view, as on the host's system), and its
    sandbox starts from the host's bwrap bound in, never the root's."""
    from verify_cli.sandbox.base import CandidateProcess, RuntimeLayer
    from verify_cli.sandbox.bwrap.rootfs import BUNDLE_DIR
    from verify_cli.sandbox.bwrap.sandbox import candidate_argv
    from verify_cli.sandbox.environment import SANDBOX_HARNESS

    root = _root(tmp_path)
    argv = candidate_argv(CandidateProcess(command=["python3", "server.py"]),
                          layer=RuntimeLayer("x", (), (), root=str(root)))
    assert argv[0].startswith(BUNDLE_DIR)
    opt, cover = argv.index("/opt"), argv.index(SANDBOX_HARNESS)
    assert argv[cover - 1] == "--tmpfs" and cover > opt
    assert not any(sys.prefix in a or sys.base_prefix in a for a in argv)  # nothing of the host's interpreter

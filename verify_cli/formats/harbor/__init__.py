"""Harbor (Terminal-Bench 2) task folders, read as they are: ``instruction.md``, ``task.toml``,
``environment/Dockerfile``, ``tests/test.sh``, ``solution/solve.sh``. See docs/harbor.md.

- :mod:`~verify_cli.formats.harbor.spec`: what a Harbor task declares (plain data);
- :mod:`~verify_cli.formats.harbor.config`: recognise the layout and load it as a :class:`Task`;
- :mod:`~verify_cli.formats.harbor.dockerfile`: the workdir and what the image bakes in;
- :mod:`~verify_cli.formats.harbor.reward`: the verifier's reward file as per-key outcomes;
- :mod:`~verify_cli.formats.harbor.verifier`: one trial on docker, isolated or shared;
- :mod:`~verify_cli.formats.harbor.session`: an agent's session in the task's environment;
- :mod:`~verify_cli.formats.harbor.terminal_bench`: Terminal-Bench 1 folders, read as they are;
- :mod:`~verify_cli.formats.harbor.convert`: converted copies (``export --format harbor``,
  ``import --preset harbor|terminal-bench``).

Kept free of imports: the task layer reads :mod:`~verify_cli.formats.harbor.spec` alone.
"""

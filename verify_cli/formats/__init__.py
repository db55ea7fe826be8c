"""Other people's task formats, read as they are published (a room per format: ``harbor``).

Kept free of imports: :mod:`verify_cli.tasks` reads a format's plain spec types from here.
"""

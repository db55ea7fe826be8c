"""The version of verify-cli, in a module of its own so that modules inside the package can name it
without importing the package root (whose lazy public names import them in turn)."""

__version__ = "0.1.0"

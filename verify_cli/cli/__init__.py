"""The command-line layer: commands parse and delegate; only console.py prints."""

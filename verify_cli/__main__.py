from verify_cli.cli.app import entry

entry()

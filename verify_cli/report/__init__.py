"""Machine-readable reports (JSON, JUnit XML). The rich console lives in verify_cli.cli.console."""

"""A small order ETL: extract CSV orders, clean and aggregate them, load a JSON summary,
driven by a TOML configuration file layered over built-in defaults."""

from orders_etl.pipeline import run_pipeline

__all__ = ["run_pipeline"]

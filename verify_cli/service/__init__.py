"""``verify-cli serve``: verify-cli's grading over HTTP, for trainers that call a reward service.

Needs the ``serve`` extra (FastAPI, uvicorn, prometheus-client)::

    from verify_cli.service import GradingService, ServiceConfig, create_app

    service = GradingService(ServiceConfig(roots=(Path("sample_tasks"),)))
    app = create_app(service)            # an ASGI app: run it under any ASGI server

``verify_cli.service.server.serve`` runs it under uvicorn with a drain on SIGTERM; the client
is :mod:`verify_cli.client` (no extra needed).
"""

from verify_cli.service.app import create_app
from verify_cli.service.core import GradingService, ServiceConfig, ServiceError

__all__ = ["GradingService", "ServiceConfig", "ServiceError", "create_app"]

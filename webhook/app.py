"""The Flask app: two admission endpoints, health, readiness and metrics.

Every decision is made by `webhook/review.py`; this module only moves bytes, times requests and turns
any HTTP-level error (wrong method, unknown path, a bug) into a short JSON body, never an HTML page.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import structlog
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import metrics
from webhook.deadline import review_within
from webhook.review import MAX_BODY_BYTES, Endpoint, handle, too_large
from webhook.rules.lookups import Lookups
from webhook.rules.pod import DEFAULT_SETTINGS, PodSettings

log = structlog.get_logger(__name__)


def _json(body: object, status: int) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status=status, mimetype="application/json")


DRAIN_LIMIT_BYTES = 64 * 1024 * 1024


def _read_body() -> bytes | int:
    """The body, or the size of one over the limit: drained unread so the client still gets its 400."""
    declared = request.content_length
    if declared is not None and declared > MAX_BODY_BYTES:
        if declared <= DRAIN_LIMIT_BYTES:
            while request.stream.read(64 * 1024):
                pass
        return declared
    if declared is not None:
        return request.stream.read(declared)  # never read(limit): that allocates the whole limit
    chunks: list[bytes] = []
    size = 0
    while chunk := request.stream.read(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return size
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(
    lookups: Lookups, settings: PodSettings = DEFAULT_SETTINGS, ready: Callable[[], bool] = lambda: True
) -> Flask:
    """An app answering from `lookups`; `ready` says whether certificates are loaded and caches synced."""
    app = Flask("phalanx-webhook")

    def review(endpoint: Endpoint) -> Response:
        started = time.perf_counter()
        body = _read_body()
        with review_within(request.args.get("timeout")):
            reply = too_large(body) if isinstance(body, int) else handle(endpoint, body, lookups, settings)
        metrics.LATENCY.labels(endpoint).observe(time.perf_counter() - started)
        metrics.REQUESTS.labels(endpoint, reply.kind, reply.operation, reply.outcome).inc()
        return _json(reply.body, reply.status)

    @app.post("/mutate")
    def mutate() -> Response:
        return review("mutate")

    @app.post("/validate")
    def validate() -> Response:
        return review("validate")

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"}, 200)

    @app.get("/readyz")
    def readyz() -> Response:
        if ready():
            return _json({"status": "ready"}, 200)
        return _json({"status": "not ready", "reason": "caches are not synced yet"}, 503)

    @app.get("/metrics")
    def scrape() -> Response:
        body, content_type = metrics.render()
        return Response(body, status=200, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        return _json({"error": err.name, "message": err.description}, err.code or 500)

    @app.errorhandler(Exception)
    def bug(err: Exception) -> Response:
        log.exception("request failed", path=request.path)
        return _json({"error": "Internal Server Error", "message": type(err).__name__}, 500)

    return app

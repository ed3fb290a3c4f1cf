"""`uvicorn --factory bench.serve_factory:app`: the app from environment settings, for benchmarks."""

from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings


def app() -> FastAPI:
    return create_app(Settings())

"""One APIRouter per resource; `ROUTERS` is the order they are mounted in."""

from . import compare, health, runs, upload

ROUTERS = [health.router, runs.router, compare.router, upload.router]

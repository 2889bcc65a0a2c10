"""One APIRouter per resource; `ROUTERS` is the order they are mounted in."""

from . import auth, compare, health, runs, upload

ROUTERS = [health.router, runs.router, compare.router, upload.router, auth.router]

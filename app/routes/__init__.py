"""One APIRouter per resource; `ROUTERS` is the order they are mounted in."""

from . import auth, health, runs

ROUTERS = [health.router, runs.router, auth.router]

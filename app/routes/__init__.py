"""One APIRouter per resource; `ROUTERS` is the order they are mounted in."""

from . import auth, compare, experiments, health, removal, runs, upload

ROUTERS = [health.router, experiments.router, runs.router, compare.router, upload.router, removal.router, auth.router]

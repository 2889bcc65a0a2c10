"""One APIRouter per resource; `ROUTERS` is the order they are mounted in."""

from . import auth, compare, docs, experiments, health, lab, removal, runs, upload

ROUTERS = [health.router, experiments.router, runs.router, compare.router, lab.router, upload.router, removal.router,
           auth.router, docs.router, runs.fallback]

"""Profile whole requests of the board in one thread with pyinstrument.

Sync endpoints normally run in the thread pool, where a sampling profiler started in
the event loop's thread does not see them: here they run inline instead.

    python -m bench.profile_request DB PATH [--htmx] [--chars N]
"""

from __future__ import annotations

import argparse
import asyncio
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("path")
    ap.add_argument("--htmx", action="store_true", help="send HX-Request: true (fragment)")
    ap.add_argument("--chars", type=int, default=6000, help="characters of the profile printed")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import fastapi.dependencies.utils
    import fastapi.routing
    import starlette.concurrency

    async def inline(func, *a, **k):
        return func(*a, **k)

    for mod in (fastapi.routing, fastapi.dependencies.utils, starlette.concurrency):
        if hasattr(mod, "run_in_threadpool"):
            mod.run_in_threadpool = inline

    import httpx
    from pyinstrument import Profiler

    from qita_board.main import create_app
    from qita_board.settings import Settings

    app = create_app(Settings(db=args.db))
    headers = {"HX-Request": "true"} if args.htmx else {}

    async def run() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                for _ in range(2):
                    await c.get(args.path, headers=headers)
                ts = []
                for _ in range(7):
                    t = time.perf_counter()
                    r = await c.get(args.path, headers=headers)
                    ts.append((time.perf_counter() - t) * 1000)
                print(r.status_code, f"{len(r.content) / 1024:.1f} KB", f"p50 {sorted(ts)[3]:.1f} ms in-process")
                p = Profiler(interval=0.0002)
                p.start()
                for _ in range(args.repeat):
                    await c.get(args.path, headers=headers)
                p.stop()
                print(p.output_text(unicode=False, color=False)[:args.chars])

    asyncio.run(run())


if __name__ == "__main__":
    main()

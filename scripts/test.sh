#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what the tests need, then runs pytest.
# - a virtualenv in .venv with the project and its test extras (editable, so tests see this checkout)
# - Debian's chromium for the real-browser tests (never a downloaded browser)
# - PostgreSQL tests when a server answers on 127.0.0.1:5432 (scripts/ci_postgres_env.sh)
# - ruff and mypy before the tests (pyproject.toml says what they check)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser tests" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

if [ -f scripts/ci_postgres_env.sh ]; then
  # shellcheck disable=SC1091
  PYTHON=.venv/bin/python source scripts/ci_postgres_env.sh
fi

# Lint and import order (ruff) and the type check (mypy), configured in pyproject.toml;
# skipped when a caller passes pytest arguments (a subset of the tests).
if [ "$#" -eq 0 ]; then
  .venv/bin/ruff check app qita tests bench scripts migrations
  .venv/bin/mypy
fi

exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"

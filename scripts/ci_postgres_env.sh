# Sourced by .ci/run: turn on the PostgreSQL tests when a server answers on 127.0.0.1:5432.
# On the project's machines that server has user postgres, trust authentication and a
# database `test`; the tests create (and drop) a database of their own per test.
# Usage: . scripts/ci_postgres_env.sh
_qita_pg_url="postgresql+psycopg://postgres@127.0.0.1:5432/test"
_qita_pg_ok=0
if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h 127.0.0.1 -p 5432 -t 5 && _qita_pg_ok=1
fi
if [ "$_qita_pg_ok" = 0 ]; then
    # No pg_isready (or it said no): ask psycopg directly, which also proves the login works.
    "${PYTHON:-/work/venv/bin/python}" -c "import psycopg; psycopg.connect('postgresql://postgres@127.0.0.1:5432/test', connect_timeout=5).close()" \
        >/dev/null 2>&1 && _qita_pg_ok=1
fi
if [ "$_qita_pg_ok" = 1 ]; then
    export QITA_TEST_POSTGRES_URL="$_qita_pg_url"
    echo "PostgreSQL answers on 127.0.0.1:5432: PostgreSQL tests ON ($QITA_TEST_POSTGRES_URL)"
else
    unset QITA_TEST_POSTGRES_URL
    echo "PostgreSQL not reachable on 127.0.0.1:5432: PostgreSQL tests skipped"
fi
unset _qita_pg_url _qita_pg_ok

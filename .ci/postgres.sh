#!/usr/bin/env bash
# Installs (from Debian's packages) and starts a PostgreSQL server on 127.0.0.1:5432 for the
# tests, then prints the URL to export as AGENTIC_TEST_POSTGRES_URL. Idempotent; run as root.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq postgresql >&2
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h | awk '{print $1"/"$2}' | grep -qx "$version/main"; then
  $SUDO pg_createcluster "$version" main >&2
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}' | grep -qx online; then
  $SUDO pg_ctlcluster "$version" main start >&2
fi
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 1
done
pg_isready -h 127.0.0.1 -p 5432 >&2
$SUDO su postgres -c "psql -q -c \"ALTER USER postgres PASSWORD 'agentic-test'\"" >&2
echo "postgres://postgres:agentic-test@127.0.0.1:5432/postgres"

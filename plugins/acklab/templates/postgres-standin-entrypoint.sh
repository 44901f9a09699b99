#!/bin/sh
# Entrypoint of the stand-in for the official postgres image (acklab.services.standin_images):
# the same contract for what docker-compose.yaml uses. On first start it initialises $PGDATA with
# the superuser $POSTGRES_USER (password $POSTGRES_PASSWORD, password logins over TCP) and creates
# $POSTGRES_DB (default: the user's name); then it runs the command (`postgres ...`) as the postgres user.
set -eu
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$pwfile"
    chown postgres "$pwfile"
    runuser -u postgres -- initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --no-instructions
    rm -f "$pwfile"
    runuser -u postgres -- pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" start
    if [ "$database" != postgres ]; then
        runuser -u postgres -- psql -h /var/run/postgresql -U "$user" -d postgres -v ON_ERROR_STOP=1 \
            -c "CREATE DATABASE \"$database\""
    fi
    runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop
fi
if [ "$1" = "postgres" ]; then
    exec runuser -u postgres -- "$@"
fi
exec "$@"

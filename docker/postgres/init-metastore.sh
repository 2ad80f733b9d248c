#!/bin/sh
# A second database in the shared Postgres for the Hive metastore (Airflow uses "airflow"). Run by the
# postgres image on its first start (empty data volume). The password comes from the environment
# (HIVE_METASTORE_DB_PASSWORD, required by docker-compose.yml) into a psql variable (\getenv), so
# psql quotes it and it is never on a command line. To change it later: ALTER USER hive PASSWORD ...
: "${HIVE_METASTORE_DB_PASSWORD:?HIVE_METASTORE_DB_PASSWORD is not set}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
\getenv hive_password HIVE_METASTORE_DB_PASSWORD
CREATE USER hive WITH PASSWORD :'hive_password';
CREATE DATABASE metastore OWNER hive;
SQL
# Hive 2.3's schema (the version of Spark's built-in Hive client, which the metastore service runs),
# created as the hive user so it owns every table; the metastore then starts with schema verification on.
psql -v ON_ERROR_STOP=1 --quiet --username "$POSTGRES_USER" --dbname metastore \
  -c 'SET ROLE hive' -f /opt/hive-schema/hive-schema-2.3.0.postgres.sql

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

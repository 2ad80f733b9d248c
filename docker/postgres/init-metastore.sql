-- A second database in the shared Postgres for the Hive metastore (Airflow uses "airflow").
CREATE USER hive WITH PASSWORD 'hive';
CREATE DATABASE metastore OWNER hive;

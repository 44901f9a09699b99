"""Long-running services acklab starts for users and tests: the Airflow stack (api-server, scheduler,
dag-processor), a project-local PostgreSQL and a Spark standalone master and worker.

Each service listens on 127.0.0.1 only, on free ports, keeps its data in a folder it is given, and
records the pid and start time of every process it started in a state file, so that stopping it
signals exactly those processes (and their children), from any later process."""

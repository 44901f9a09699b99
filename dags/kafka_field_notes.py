"""Weekly Airflow DAG: every preset of the practitioners' field notes, each on its own cluster, on
the write-ups' Java client with librdkafka beside it (or on the `client` named), audited by Spark,
validated by Great Expectations, then one report: what each write-up claimed and what acklab
measured, claim by claim and client by client."""

from acklab.orchestration.dags import field_notes_dag

dag = field_notes_dag("kafka_field_notes", "@weekly", __doc__)

if __name__ == "__main__":
    dag.test()

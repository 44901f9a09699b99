"""Weekly Airflow DAG: every preset of the practitioners' field notes, each on its own cluster,
audited by Spark, validated by Great Expectations, then one report: what each write-up claimed and
what acklab measured, claim by claim."""

from acklab.orchestration.dags import field_notes_dag

dag = field_notes_dag("kafka_field_notes", "@weekly", __doc__)

if __name__ == "__main__":
    dag.test()

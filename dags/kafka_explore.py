"""Weekly Airflow DAG: `acklab explore` for an hour. Trials drawn from the fault catalog, the profiles
and the versions (fault mixes, overlaps, targets, timings, rates, re-tuned batching), each a real
cluster, audited by Spark and validated by Great Expectations; each red row confirmed alone with
the negative controls, shrunk into a repro folder, labelled with the known bug it shows, and written
as a maintainer-ready report. The run fails when a finding is confirmed."""

from acklab.orchestration.dags import explore_dag

dag = explore_dag("kafka_explore", "@weekly", 60.0, __doc__)

if __name__ == "__main__":
    dag.test()

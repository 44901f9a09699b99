"""Bad input, as a new user types it: through the CLI and through the DAG params, each mistake is one
line on stderr naming what is wrong, exit code 2, no traceback, and nothing is created (no run
folder, no cluster, no process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import typer

from acklab.base.property_policy import examples
from acklab.workload.profiles import MANAGED_PROPERTIES

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent

YAML_SYNTAX_ERROR = "name: t\nbrokers: [3\n"
TOPOLOGY_RF_TOO_HIGH = "name: t\nbrokers: 1\nreplication_factor: 2\n"
SCHEDULES = {
    "missing-partition.yaml": "- {fault: leader-kill, target: 'leader:99'}\n",
    "missing-broker.yaml": "- {fault: leader-kill, target: 'broker:99'}\n",
    "overlap.yaml": "- {fault: leader-kill, at_s: 2, duration_s: 10}\n- {fault: follower-kill, at_s: 5, duration_s: 5}\n",
    "syntax.yaml": "- {fault: leader-kill\n",
    "bad-option.yaml": "- {fault: ack-loss, options: {probability: 2}}\n",
    "unknown-fault.yaml": "- {fault: meteor}\n",
    "no-target.yaml": "- {fault: rolling-restart, target: 'leader:0'}\n",
    "before-load.yaml": "- {fault: leader-restart, before_load: true}\n",
}

# (CLI arguments after `acklab`, text the one line must contain)
CLI_CASES: list[tuple[list[str], str]] = [
    (["run", "--fault", "meteor"], "unknown fault 'meteor'; valid: none, leader-kill"),
    (["run", "--profile", "fastest"], "unknown profile 'fastest'; valid:"),
    (["run", "--topology", "nine-brokers"], "topology 'nine-brokers' not found (known: dedicated-controllers"),
    (["run", "--topology", "{tmp}/syntax.yaml"], "not valid YAML at line 2"),
    (["run", "--topology", "{tmp}/rf.yaml"], "replication_factor (2) > brokers (1)"),
    (["run", "--topology", "{tmp}/absent.yaml"], "not found"),
    (["run", "--schedule", "{tmp}/missing-partition.yaml"], "'leader:99': partition 99 does not exist: topics have 3 (0..2)"),
    (["run", "--schedule", "{tmp}/missing-broker.yaml"], "'broker:99': broker 99 does not exist: brokers are 1, 2, 3"),
    (["run", "--schedule", "{tmp}/overlap.yaml"], "leader-kill (2-12 s) and follower-kill (5-10 s) overlap"),
    (["run", "--schedule", "{tmp}/syntax.yaml"], "not valid YAML"),
    (["run", "--schedule", "{tmp}/absent.yaml"], "schedule {tmp}/absent.yaml: no such file"),
    (["run", "--schedule", "{tmp}/bad-option.yaml"], "probability"),
    (["run", "--schedule", "{tmp}/unknown-fault.yaml"], "unknown fault 'meteor'"),
    (["run", "--schedule", "{tmp}/no-target.yaml"], "rolling-restart takes no target"),
    (["run", "--schedule", "{tmp}/before-load.yaml", "--profile", "transactional"], "transactional is transactional and its producers"),
    (["run", "--topology", "single-broker", "--fault", "replicas-down"], "replicas-down stops followers; topology single-broker has replication_factor 1"),
    (["run", "--kafka-version", "4.0.0"], "kafka_version 4.0.0: jars missing"),
    (["run", "--kafka-version", "2.8.0"], "String should match pattern"),
    (["run", "--client-version", "1.9.0"], "client_version '1.9.0': confluent-kafka releases from 2.0.2 on"),
    (["run", "--client-version", "2.1.1"], "client 2.1.1 is not set up: run `acklab setup --client-version 2.1.1`"),
    (["run", "--messages", "0"], "messages: Input should be greater than or equal to 1"),
    (["run", "--producers", "0"], "producers: Input should be greater than or equal to 1"),
    (["run", "--producers", "5", "--messages", "4"], "producers (5) > messages (4)"),
    (["run", "--topics", "3", "--keys", "2"], "topics (3) > keys (2): every topic needs a key"),
    (["run", "--message-bytes", "8"], "message_bytes: Input should be greater than or equal to 16"),
    (["run", "--message-bytes", "1000000"], "refused by the producer of profile leader-ack (librdkafka"),
    (["run", "--messages", "100000000", "--message-bytes", "16"], "must be >= 18 to hold the id and seq"),
    (["run", "--rate", "-5"], "rate: Input should be greater than 0"),
    (["run", "--rate", "0"], "at full speed 30000 messages may all be sent before a fault starts"),
    (["run", "--messages", "1000", "--rate", "1000"], "leader-kill at 2.0s would start after the load ends"),
    (["run", "--fault-duration-s", "0"], "fault_duration_s: Input should be greater than 0"),
    (["run", "--fault-at-s", "-1"], "fault_at_s: Input should be greater than or equal to 0"),
    (["run", "--keys", "0"], "keys: Input should be greater than or equal to 1"),
    (["run", "--partitioner", "random"], "partitioner: Input should be 'consistent_random' or 'murmur2_random'"),
    (["run", "--backend", "k8s"], "backend: Input should be 'local' or 'docker'"),
    (["run", "--profile", "idempotent", "--profile", "idempotent"], "profiles must be distinct"),
    (["run", "--fault", "none", "--fault", "none"], "faults must be distinct"),
    (["run", "--profiles-file", "{tmp}/absent.yaml"], "profiles file {tmp}/absent.yaml: no such file"),
    (["run", "--profiles-file", "{tmp}/contradiction.yaml"], "profile mine: (top level): enable_idempotence requires acks=all"),
    (["run", "--librdkafka", "acks"], "--librdkafka 'acks': expected PROPERTY=VALUE"),
    (["run", "--librdkafka", "no.such.property=1"], 'No such configuration property: "no.such.property"'),
    (["run", "--librdkafka", "enable.idempotence=maybe"], "enable.idempotence: expected true or false, got 'maybe'"),
    (["run", "--preset", "nothing-like-it"], "unknown preset 'nothing-like-it'"),
    (["run", "--preset", "quick", "--presets-file", "{tmp}/absent.yaml"], "presets file {tmp}/absent.yaml: no such file"),
    (["run", "--params", "{tmp}/absent.json"], "no such file"),
    (["run", "--params", "{tmp}/absent.json", "--messages", "5"], "--params fixes the run: --messages cannot be combined with it"),
    (["run", "--schedule", "{tmp}/bad-apis.yaml"], "error 'NOT_ENOUGH_REPLICAS' is not one a broker answers EndTxn with"),
    (["repro", "20990101T000000-000000", "x__none"], "no run 20990101T000000-000000"),
    (["repro"], "give RUN_ID and SCENARIO"),
    (["run", "--duration-s", "-1"], "duration_s: Input should be greater than 0"),
    (["run", "--client", "python:1.0"], "client: String should match pattern"),
    (["run", "--client", "java:2.8.0"], "java client version '2.8.0': kafka-clients 3.x.y or 4.x.y"),
    (["run", "--client", "java:3.8.0"], "java client 3.8.0 is not set up (or its driver changed): run `acklab setup --java-client-version 3.8.0`"),
    (["run", "--producer-config", "{tmp}/unknown.properties"], "profile custom: kafka-clients 4.3.1 rejects ackss: unknown producer property ackss"),
    (["run", "--producer-config", "{tmp}/invalid.properties"], "rejects acks: Invalid value 2 for configuration acks"),
    (["run", "--producer-config", "{tmp}/conflict.properties"], "rejects acks: Must set acks to all in order to use the idempotent producer"),
    (["run", "--producer-config", "{tmp}/timeouts.properties"], "rejects delivery.timeout.ms"),
    (["run", "--producer-config", "{tmp}/absent.properties"], "producer config {tmp}/absent.properties: no such file"),
    (["run", "--producer-config", "{tmp}/partitioner.properties"], "a custom partitioner is not supported"),
    (["run", "--client", "librdkafka", "--producer-config", "{tmp}/conflict.properties"], "profile custom is Java producer properties: it runs on the java client"),
    (["run", "--producer-config", "{tmp}/small-requests.properties", "--message-bytes", "20000"], "(kafka-clients 4.3.1: RecordTooLargeException"),
    (["setup", "--java-client-version", "2.8.0"], "java client version '2.8.0': kafka-clients 3.x.y or 4.x.y"),
    (["setup", "--kafka-version", "9.9.9"], "kafka_version '9.9.9': supported versions are 3.3.x to 3.9.x, or 4.x"),
    (["setup", "--client-version", "1.0.0"], "client_version '1.0.0': confluent-kafka releases from 2.0.2 on"),
    (["check-topology", "{tmp}/rf.yaml"], "replication_factor (2) > brokers (1)"),
    (["run", "--runs-under-a-file"], "cannot create the run store"),
    (["run", "--processing", "exactly-twice"], "processing.0: Input should be 'eos', 'at-least-once', 'at-most-once' or 'eos-naive'"),
    (["run", "--processing", "eos", "--processors", "0"], "processors: Input should be greater than or equal to 1"),
    (["run", "--processing", "eos", "--input-profile", "transactional"], "a pipeline's input is written by a non-transactional profile"),
    (["run", "--processing", "eos", "--input-profile", "fastest"], "unknown profile 'fastest'"),
    (["run", "--processing", "eos", "--group-protocol", "gossip"], "group_protocol: Input should be 'classic' or 'consumer'"),
    (["run", "--junit", "{tmp}/absent/results.xml"], "absent/results.xml: its folder {tmp}/absent does not exist or is not writable"),
    (["run", "--junit", "{tmp}"], "is a folder; give a file path"),
    (["run", "--fault", "processor-kill"], "processor-kill acts on a pipeline's processors or coordinators: give processing"),
    (["run", "--processing", "eos", "--consumer-property", "interceptor.classes=com.example.Spy"], "consumer property 'interceptor.classes' is not one a processor may take"),
    (["run", "--processing", "eos", "--processor-producer-property", "bootstrap.servers=10.1.1.1:9092"], "producer property 'bootstrap.servers' is not one a processor may take"),
    (["run", "--processing", "eos", "--consumer-property", "session.timeout.ms"], "--consumer-property 'session.timeout.ms': expected PROPERTY=VALUE"),
    (["run", "--processing", "eos", "--consumer-property", "sesion.timeout.ms=9000"],
     'params.processor_config.consumer: librdkafka 2.16.0 rejects it: No such configuration property: "sesion.timeout.ms"'),
    (["run", "--processing", "eos", "--client", "java", "--consumer-property", "fetch.maxx.wait.ms=100"],
     "params.processor_config.consumer: kafka-clients 4.3.1 rejects fetch.maxx.wait.ms: unknown consumer property fetch.maxx.wait.ms"),
    (["run", "--processing", "eos", "--client", "java", "--consumer-property", "session.timeout.ms=soon"],
     "params.processor_config.consumer: kafka-clients 4.3.1 rejects session.timeout.ms: Invalid value soon for configuration session.timeout.ms"),
    (["run", "--processing", "eos", "--client", "java", "--processor-producer-property", "lingr.ms=5"],
     "params.processor_config.producer: kafka-clients 4.3.1 rejects lingr.ms: unknown producer property lingr.ms"),
]

# (DAG, params JSON, text the one line must contain): checked as the trigger form and `plan` would.
DAG_CASES: list[tuple[str, dict, str]] = [
    ("kafka_delivery_matrix", {"faults": ["meteor"]}, "params.faults: 'meteor' is not one of"),
    ("kafka_explore", {"faults": ["planted-loss"]}, "params.faults: 'planted-loss' is not one of"),
    ("kafka_explore", {"budget_minutes": 0}, "params.budget_minutes: 0 is less than or equal to the minimum of 0"),
    ("kafka_explore", {"client_versions": ["2.1.0"]}, "client 2.1.0 is not set up"),
    ("kafka_explore", {"topology": "../../etc/x"}, "params.topology: '../../etc/x' is not one of"),
    ("kafka_delivery_matrix", {"messages": 0}, "params.messages: 0 is less than the minimum of 1"),
    ("kafka_delivery_matrix", {"rate": -1}, "params.rate"),
    ("kafka_delivery_matrix", {"topology": "nine-brokers"}, "params.topology: 'nine-brokers' is not one of"),
    ("kafka_delivery_matrix", {"kafka_version": "2.8.0"}, "params.kafka_version"),
    ("kafka_delivery_matrix", {"profiles": ["fastest"]}, "unknown profile 'fastest'; valid:"),
    ("kafka_delivery_smoke", {"schedule": [{"fault": "leader-kill", "target": "leader:99"}]}, "partition 99 does not exist"),
    ("kafka_delivery_smoke", {"schedule": [{"fault": "leader-kill", "target": "broker:9"}]}, "broker 9 does not exist"),
    ("kafka_delivery_smoke", {"messages": 1000}, "would start after the load ends"),
    ("kafka_delivery_smoke", {"message_bytes": 1000000}, "refused by the producer of profile leader-ack"),
    ("kafka_delivery_smoke", {"client_version": "2.1.1"}, "client 2.1.1 is not set up"),
    ("kafka_delivery_smoke", {"custom_profiles": {"mine": {"acks": "2"}}, "profiles": ["mine"]}, "profile mine: acks"),
    ("kafka_delivery_smoke", {"nonsense": 1}, "params: unknown param 'nonsense'"),
    ("kafka_delivery_smoke", {"broker_config": {"message.max.bytes": 120}}, "is above the brokers' message.max.bytes (120)"),
    ("kafka_delivery_smoke", {"profiles": ["transactional"], "broker_config": {"transaction.state.log.replication.factor": 4}},
     "the transaction state topic cannot be created and written with transaction.state.log.replication.factor 4"),
    ("kafka_delivery_smoke", {"client": "java:2.8.0"}, "kafka-clients 3.x.y or 4.x.y"),
    ("kafka_delivery_smoke", {"client": "java", "custom_profiles": {"mine": {"java": {"ackss": "all"}}}, "profiles": ["mine"]},
     "profile mine: kafka-clients 4.3.1 rejects ackss: unknown producer property ackss"),
    ("kafka_delivery_smoke", {"custom_profiles": {"mine": {"librdkafka": {"plugin.library.path": "/tmp/x.so"}}}, "profiles": ["mine"]},
     "params.custom_profiles: profile mine: overrides: librdkafka property plugin.library.path refused: it would dlopen()"),
    ("kafka_delivery_smoke", {"client": "java", "custom_profiles": {"mine": {"java": {"sasl.jaas.config": "x"}}}, "profiles": ["mine"]},
     "java property sasl.jaas.config refused: SASL settings load login modules"),
    ("kafka_delivery_smoke", {"client": "java", "custom_profiles": {"mine": {"java": {"interceptor.classes": "com.example.Evil"}}}, "profiles": ["mine"]},
     "java property interceptor.classes refused: it would load code"),
    ("kafka_delivery_smoke", {"broker_config": {"authorizer.class.name": "com.example.Evil"}}, "broker property authorizer.class.name refused"),
    ("kafka_delivery_smoke", {"processing": ["eos"], "processor_config": {"producer": {"ssl.keystore.location": "/etc/passwd"}}},
     "producer property 'ssl.keystore.location' is not one a processor may take"),
    ("kafka_delivery_smoke", {"topology": "/etc/passwd"}, "params.topology: '/etc/passwd' is not one of"),
    ("kafka_version_regression", {"kafka_versions": ["4.3.1"], "client_versions": []}, "params: a version comparison needs 2 or more"),
    ("kafka_version_regression", {"kafka_versions": ["4.3.1", "4.3.1"]}, "params.kafka_versions"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-input")
    (folder / "syntax.yaml").write_text(YAML_SYNTAX_ERROR)
    (folder / "rf.yaml").write_text(TOPOLOGY_RF_TOO_HIGH)
    (folder / "contradiction.yaml").write_text("mine: {acks: '1', enable_idempotence: true}\n")
    (folder / "unknown.properties").write_text("# a Spring Boot team's file\nbootstrap.servers=prod:9092\nackss=all\n")
    (folder / "invalid.properties").write_text("acks=2\n")
    (folder / "bad-apis.yaml").write_text("- {fault: error-inject, options: {apis: [EndTxn]}}\n")
    (folder / "small-requests.properties").write_text("max.request.size=10000\n")
    (folder / "conflict.properties").write_text("acks=1\nenable.idempotence=true\n")
    (folder / "timeouts.properties").write_text("delivery.timeout.ms=1000\nrequest.timeout.ms=30000\n")
    (folder / "partitioner.properties").write_text("partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner\n")
    for name, text in SCHEDULES.items():
        (folder / name).write_text(text)
    return folder


def _acklab(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "acklab"), *args], env=env, capture_output=True, text=True, timeout=120)


def _processes_on(folder: Path) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if any(str(folder) in part for part in (p.info["cmdline"] or []))]


def _assert_one_line_and_nothing_created(result: subprocess.CompletedProcess[str], expected: str, runs: Path) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0], lines[0]
    assert not runs.exists() or list(runs.iterdir()) == [], f"created {list(runs.iterdir())}"
    assert _processes_on(runs) == []


@pytest.mark.parametrize(("args", "expected"), CLI_CASES, ids=[" ".join(a)[:60] for a, _ in CLI_CASES])
def test_bad_cli_input_fails_in_one_line_before_anything_starts(
    files: Path, tmp_path: Path, args: list[str], expected: str
) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "ACKLAB_RUNS": str(runs)}
    if "--runs-under-a-file" in args:  # a run store that cannot be created (root may write anywhere else)
        args = ["run"]
        (tmp_path / "a-file").write_text("")
        env["ACKLAB_RUNS"] = str(tmp_path / "a-file" / "runs")
    result = _acklab(env, *(a.replace("{tmp}", str(files)) for a in args))
    _assert_one_line_and_nothing_created(result, expected.replace("{tmp}", str(files)), runs)


@pytest.mark.parametrize(("dag_id", "conf", "expected"), DAG_CASES, ids=[f"{d}-{json.dumps(c)[:40]}" for d, c, _ in DAG_CASES])
def test_bad_dag_params_fail_in_one_line_before_anything_starts(tmp_path: Path, dag_id: str, conf: dict, expected: str) -> None:
    runs = tmp_path / "runs"
    result = _acklab({**os.environ, "ACKLAB_RUNS": str(runs)}, "check-params", dag_id, json.dumps(conf))
    _assert_one_line_and_nothing_created(result, expected, runs)


@pytest.mark.parametrize(("who", "name", "value"), examples(), ids=[f"{w}-{n}" for w, n, _ in examples()])
def test_a_property_that_loads_code_or_leaves_the_sandbox_is_refused_before_anything_starts(
    tmp_path: Path, who: str, name: str, value: str
) -> None:
    """Every rule's example of the property policy, through `acklab run --params`: a user's raw librdkafka
    or Java profile, or the run's broker settings (`acklab.base.property_policy`)."""
    if who == "broker":
        params: dict = {"broker_config": {name: value}}
    else:
        params = {"custom_profiles": {"mine": {who: {name: value}}}, "profiles": ["mine"], **({"client": "java"} if who == "java" else {})}
    (tmp_path / "params.json").write_text(json.dumps(params))
    runs = tmp_path / "runs"
    result = _acklab({**os.environ, "ACKLAB_RUNS": str(runs)}, "run", "--params", str(tmp_path / "params.json"))
    shown = name if " " not in name else repr(name)
    expected = f"{name} is set by acklab" if who == "librdkafka" and name in MANAGED_PROPERTIES else f"{who} property {shown} refused: "
    _assert_one_line_and_nothing_created(result, expected, runs)


def test_every_option_of_acklab_run_that_takes_a_value_has_a_bad_input_case() -> None:
    """A new option of `acklab run` comes with its mistake above (flags take no value to get wrong)."""
    from acklab.orchestration.cli import app

    run = typer.main.get_command(app).commands["run"]
    options = {option for param in run.params if param.param_type_name == "option" and not param.is_flag for option in param.opts}
    tried = {arg for args, _ in CLI_CASES if args[0] == "run" for arg in args}
    assert "--fault" in options and sorted(options - tried) == []

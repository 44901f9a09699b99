"""What the cluster's own settings would refuse, found at plan time: a run that cannot work is
refused with one line (SpecError) before any broker starts, never run into an empty verdict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from acklab.base.spec import SpecError
from acklab.cluster.layout import broker_settings
from acklab.cluster.topology import Topology
from acklab.nemesis.schedule import FaultStep
from acklab.workload import families
from acklab.workload.profiles import ProducerProfile
from acklab.workload.spec import RECORD_OVERHEAD, LoadSpec

KAFKA_MESSAGE_MAX_BYTES = 1048588  # Kafka's default message.max.bytes (a record batch, after compression)


def message_max_bytes(settings: Mapping[str, str]) -> int:
    """The largest record batch brokers with `settings` (`broker_settings`) accept."""
    return int(settings.get("message.max.bytes", KAFKA_MESSAGE_MAX_BYTES))


def check_batches(settings: Mapping[str, str], family: str, profile: ProducerProfile, config: Mapping[str, object]) -> None:
    """SpecError when the client family named `family`, with `config`, may build record batches
    brokers with `settings` refuse and does not split a batch the broker answered MESSAGE_TOO_LARGE
    (`FamilyFacts.unsplit_batch_bytes`)."""
    batch = families.named(family).unsplit_batch_bytes(config)
    if batch is not None and batch > (limit := message_max_bytes(settings)):
        raise SpecError(
            f"params.broker_config: message.max.bytes {limit} is below the batches {family} builds for profile {profile.name} "
            f"(up to {batch} bytes: its batch.size and message.max.bytes), and it does not split a refused batch: every such write "
            f"would fail (MSG_SIZE_TOO_LARGE); give the profile batch.size {limit} or less"
        )


def check_feasible(topology: Topology, profiles: Iterable[ProducerProfile], load: LoadSpec, steps: Iterable[FaultStep]) -> dict[str, str]:
    """SpecError naming the setting when the brokers of `topology` (their rendered settings,
    `broker_overrides` and a run's `broker_config` included) would refuse the load's records,
    every acks=all write, a transactional producer's first step, or the fault's effect. Returns
    those settings (for `check_batches`)."""
    settings = broker_settings(topology)
    limit = message_max_bytes(settings)
    if load.largest_batch_bytes > limit:
        raise SpecError(
            f"params.message_bytes: a record of {load.message_bytes} bytes with its key and batch header (about "
            f"{load.largest_batch_bytes} bytes) is above the brokers' message.max.bytes ({limit}): every write would be refused "
            f"(MESSAGE_TOO_LARGE); at most {limit - len(load.longest_key) - RECORD_OVERHEAD} bytes fit"
        )
    min_insync = int(settings["min.insync.replicas"])
    if min_insync != topology.min_insync_replicas:
        raise SpecError(
            f"params.broker_config: min.insync.replicas {min_insync} differs from the topology's min_insync_replicas "
            f"({topology.min_insync_replicas}), which the guarantee model reads: set it in the topology"
        )
    if any(step.fault == "replicas-down" for step in steps) and min_insync < 2:
        raise SpecError(
            f"params.faults: replicas-down stops followers until the ISR is below min.insync.replicas, and with "
            f"min.insync.replicas {min_insync} the leader alone meets it: use a topology with min_insync_replicas >= 2"
        )
    transactional = [p.name for p in profiles if p.transaction is not None]
    if transactional:
        state_rf = int(settings["transaction.state.log.replication.factor"])
        state_isr = int(settings["transaction.state.log.min.isr"])
        if state_rf > topology.brokers or state_isr > state_rf:
            raise SpecError(
                f"params.profiles: {transactional[0]} is transactional, and the transaction state topic cannot be created and written "
                f"with transaction.state.log.replication.factor {state_rf} and transaction.state.log.min.isr {state_isr} on "
                f"{topology.brokers} broker(s): the producer would never initialise"
            )
    return settings

"""The guarantee model: what a scenario's matrix row must show, generated from the claims registry
(`acklab.model.claims`). A setting gets its class (`acklab.model.classes`); its row must meet every
documented claim whose scope matches: the class's promise (its no-fault bounds only without a fault),
then each rule and fault effect that applies. Each expectation names the Great Expectations suite that
checks it (`acklab.checker.gx_suites`); docs/guarantees.md is generated from the same tables
(``acklab model-table``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acklab.cluster.topology import Topology
from acklab.model.claims import CLAIMS, Expectation, claim, guarantee_suite
from acklab.model.classes import Guarantee, classify, reason
from acklab.model.setting import Setting
from acklab.workload.client import Client
from acklab.workload.profiles import ProducerProfile

if TYPE_CHECKING:
    from acklab.nemesis.schedule import FaultStep


@dataclass(frozen=True)
class Expected:
    """What the model expects of one scenario: its class and the exact expectations of its row."""

    guarantee: Guarantee
    expectations: tuple[Expectation, ...]
    reason: str = ""  # which class rule matched and the settings that decided it
    transaction_version: int = 0  # the transaction protocol the model assumed (`Setting.transaction_version`); 0: no transactions

    @property
    def suites(self) -> tuple[str, ...]:
        """The suites that check this row, class suite first."""
        return tuple(dict.fromkeys([guarantee_suite(self.guarantee), *(e.suite for e in self.expectations)]))


def class_expectations(guarantee: Guarantee) -> tuple[Expectation, ...]:
    """Everything the class suite checks: its promise, then the no-fault extras."""
    return claim(guarantee_suite(guarantee)).expectations()


def expect_setting(setting: Setting) -> Expected:
    """The class and the exact expectations of a row with this setting: every documented claim that
    applies, in registry order (the class's promise first)."""
    expectations = [
        e
        for c in CLAIMS
        if c.documented and c.scope.applies(setting)
        for e in c.expectations()
        if not e.no_fault_only or not setting.faults
    ]
    return Expected(classify(setting), tuple(expectations), reason(setting), setting.transaction_version)


def expect(
    profile: ProducerProfile, topology: Topology, schedule: Sequence[FaultStep], client: Client | None = None, processing: str | None = None
) -> Expected:
    """What a scenario of `profile` on `topology` under `schedule`, run by `client`, must show
    (`Setting.of`); `processing`: a pipeline's style, whose input `profile` writes."""
    return expect_setting(Setting.of(profile, topology, schedule, client, processing))


def suite_expectations() -> dict[str, tuple[Expectation, ...]]:
    """Every suite the model uses, with all its expectations: the documented claims, in registry order."""
    return {c.id: c.expectations() for c in CLAIMS if c.documented}

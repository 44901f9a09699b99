"""plant_reorder: a PRODUCE request of a producer without idempotence is held back until the next
request of its connection, which writes the same partition, has passed it: the broker appends the
later request first; the client gets both answers in the order it sent the requests (the Java
client checks that order). Each reordered partition is logged (`reordered`).

A held request (A) waits for the next request on its connection (B). If B is an eligible PRODUCE
writing a partition A writes, B is forwarded, then A, on the client's own connection (so the broker
appends B before A), and B's answer is held back until A's has gone to the client. Otherwise, or if
nothing comes within `wait_s`, A is forwarded first, then whatever came: nothing reordered
(`reorder_missed`). A producer allowing one request in flight never sends B while A is unanswered,
so its requests are never reordered (the guarantee `max.in.flight.requests.per.connection=1` buys).

The truth, per partition both write: the records of A whose key is also the key of a record of B.
The checker orders records per partition and key, so those are exactly the records it must find
late (a lower sequence stored after a higher one of their key). It is known once both answers came:
each partition's entry gets `a_offset` and `b_offset` (the base offsets the broker gave), and its
`error` is NONE when both were appended with B first, else why nothing was planted (B failed: its
retry lands behind A; both in order), and stays null when an answer could not be read or A failed
(a producer without idempotence retries A behind B: whether its records end up late is unknown).
Requests of an idempotent or transactional producer pass untouched (the broker would refuse A's
sequence after B's: `idempotent_passed`), as do acks=0 requests (`unanswered_passed`), requests the
codec cannot count (`unparsed_produce`) and compressed ones, whose keys it cannot read
(`compressed_passed`)."""

from __future__ import annotations

import time

from pydantic import Field

from acklab.proxy.behaviours.base import Activation, Behaviour, Host, Rule, Verdict
from acklab.proxy.behaviours.planting import PlantingOptions, TopicShare, plain_produce, topic_key
from acklab.proxy.codes import PRODUCE, error_name
from acklab.proxy.connection import Connection, Held, Tap
from acklab.proxy.protocol import PRODUCE_VERSIONS, ProtocolError, decode_response

Keys = dict[tuple[str, int], list[bytes | None]]  # (topic, partition) -> the keys of its records, in order
FIRST_TRIES = 3  # requests of a topic held, each up to `wait_s`, before its share applies, unless one was reordered sooner


class PlantReorderOptions(PlantingOptions):
    probability: float = Field(
        0.2, ge=0, le=1, description="share of the eligible produce requests held until the next one passes, once each topic's has been reordered",
    )
    # A Java producer with acks=all fills its five requests in flight within milliseconds, then sends
    # the next only once one is answered (0.4-1 s measured on 3 brokers here): a shorter wait misses it.
    wait_s: float = Field(1.0, gt=0, le=5, description="how long a held request waits for the next one before it is forwarded as it came")


class _Swap(Tap):
    """On one connection: B's answer is held back and put right behind A's (`Connection.expected`);
    both answers' offsets go to the activation."""

    def __init__(self, activation: PlantReorder, conn: Connection) -> None:
        self.activation, self.conn = activation, conn
        self.pending: dict[int, tuple[str, int, list[dict]]] = {}  # correlation -> (which, the other's correlation, entries)

    def on_response(self, correlation: int, body: bytes, version: int) -> bytes | None:
        if (pending := self.pending.pop(correlation, None)) is None:
            return body
        which, other, entries = pending
        self.activation.answered(which, entries, body, version)
        if which == "a":
            return body
        expected = self.conn.expected
        at = next((n for n, entry in enumerate(expected) if entry[0] == other and entry[3] is None), None)
        if at is None:  # A is no longer awaited (its connection broke): B's answer goes on now
            return body
        expected.insert(at + 1, (correlation, PRODUCE, version, body, 0.0))
        return None


class PlantReorder(Activation):
    """Holds an eligible PRODUCE request (A) until the next request of its connection (B): B then
    goes first when it writes a partition A writes (see the module)."""

    def __init__(self, rule: Rule, host: Host) -> None:
        super().__init__(rule, host)
        self.logged: list[dict] = []
        self.swaps: dict[int, _Swap] = {}  # id(connection) -> its tap
        # A topic counts once records of it were held behind later ones of their key; a producer that
        # never sends a request behind a held one (one in flight) is held `FIRST_TRIES` times, then left to the share.
        self.share = TopicShare(rule.options.probability, FIRST_TRIES)

    def eligible(self, body: bytes, api_key: int, version: int) -> Keys | None:
        """The keys of each partition of an eligible PRODUCE request (see the module), or None."""
        if (plain := plain_produce(self, body, api_key, version)) is None:
            return None
        partitions = plain[2]
        keys = {(topic_key(topic), partition.index): partition.record_keys() for topic, partition, _ in partitions}
        if any(k is None for k in keys.values()):
            self.stats["compressed_passed"] += 1
            return None
        return keys  # type: ignore[return-value]

    def on_request(self, conn: Connection, size: bytes, body: bytes, correlation: int, api_key: int, version: int) -> Verdict:
        if (keys := self.eligible(body, api_key, version)) is None or not self.share.chosen({topic for topic, _ in keys}):
            return Verdict.FORWARD
        # The held request's keys travel with it (its log is dropped once it is answered).
        held = Held(size + body, correlation, api_key, version, time.monotonic() + self.rule.options.wait_s, True, {"keys": keys}, self)
        self.host.hold(conn, held)
        self.stats["held_for_reorder"] += 1
        return Verdict.TAKEN

    def on_queued(self, conn: Connection, frame: bytes, correlation: int, api_key: int, version: int, due: float) -> None:
        """The request after a held one (B): it goes first if it writes a partition A writes."""
        held = conn.held.popleft()
        a_keys: Keys = held.log.pop("keys", {})
        b_keys = self.eligible(frame[4:], api_key, version) if api_key == PRODUCE and version in PRODUCE_VERSIONS else None
        shared = sorted(set(a_keys) & set(b_keys or {}))
        if shared and not conn.upstream.is_closing():
            conn.forward(frame, correlation, api_key, version)
            conn.forward(held.frame, held.correlation, held.api_key, held.version)
            now = time.time()
            entries = []
            for topic, partition in shared:
                late_keys = set(b_keys[(topic, partition)])  # type: ignore[index]
                entries.append({
                    "topic": topic, "partition": partition, "held_records": len(a_keys[(topic, partition)]),
                    "records": sum(key in late_keys for key in a_keys[(topic, partition)]), "at": now,
                    "answered": False, "error": None, "a_offset": None, "b_offset": None,
                })
            self.logged.extend(entries)
            self.share.planted({entry["topic"] for entry in entries if entry["records"]})
            swap = self.swaps.get(id(conn))
            if swap is None or swap not in conn.response_taps:
                swap = self.swaps[id(conn)] = _Swap(self, conn)
                conn.response_taps.insert(0, swap)
            swap.pending[correlation] = ("b", held.correlation, entries)
            swap.pending[held.correlation] = ("a", correlation, entries)
            conn.awaiting.setdefault(correlation, {})
            conn.awaiting.setdefault(held.correlation, {})
            self.affected += 1
            self.stats["reordered_requests"] += 1
        elif conn.upstream.is_closing():  # the broker's connection is gone: neither can be delivered
            self.stats["held_lost"] += 2
        else:
            conn.forward(held.frame, held.correlation, held.api_key, held.version)
            conn.forward(frame, correlation, api_key, version)
            self.stats["reorder_missed"] += 1
        conn.released.set()
        conn.wake.set()

    def answered(self, which: str, entries: list[dict], body: bytes, version: int) -> None:
        """One of a swapped pair's answers: each shared partition's offset, and once both came,
        whether the broker appended B before A (error NONE: the entry's records are planted)."""
        try:
            _, response = decode_response(body, version)
            answers = {(topic_key(t), p.index): p for t in response.topics for p in t.partitions}
        except ProtocolError:
            self.stats["unparsed_answers"] += 1
            answers = {}
        for entry in entries:
            answer = answers.get((entry["topic"], entry["partition"]))
            if answer is None:
                entry[f"{which}_error"] = "unknown"
            else:
                entry[f"{which}_offset"] = answer.base_offset
                entry[f"{which}_error"] = error_name(answer.error_code)
            if "a_error" in entry and "b_error" in entry:
                entry["answered"] = True
                errors = (entry.pop("a_error"), entry.pop("b_error"))
                if "unknown" in errors or errors[0] != "NONE":
                    # Unknown, or A failed: a producer without idempotence retries it behind B's records,
                    # which may make its records late after all; what is planted is unknown (error null).
                    continue
                if errors[1] != "NONE":  # B failed, A appended: B's retry lands behind A, nothing is late
                    entry["error"] = f"not both appended: B {errors[1]}"
                elif entry["a_offset"] <= entry["b_offset"]:
                    entry["error"] = "appended in order"
                else:
                    entry["error"] = "NONE"
                    self.stats["reordered_records"] += entry["records"]
        if all(entry["answered"] for entry in entries):
            self.share.settled(entries)

    def evidence(self) -> list[dict]:
        return self.logged


BEHAVIOUR = Behaviour("plant_reorder", PlantReorderOptions, ("reordered_requests",), PlantReorder, log="reordered")

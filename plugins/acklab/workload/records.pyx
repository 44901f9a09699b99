# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Per-message work in C: the record format (docs/evidence.md: key `p<n>-k<k>`, value `<id>:<seq>:`
then padding), handing records to `produce()`, the delivery reports that carry a value's id back (in
the producer processes of every client version, which import it from `plugins/`), and the audit's
reading of records back into columns (`read_back`). Compiled with Cython by `make setup`.

Id and seq are zero-padded to one width per scenario (the digits of the largest id), so a report's
id is its value's first `width` bytes.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport INT64_MAX
from libc.string cimport memcpy

import numpy as np
from confluent_kafka import KafkaError, KafkaException, Message

# A value's `<id>:<seq>:` prefix is looked for in its first bytes only: two 19-digit int64s fit.
PREFIX_BYTES = 48

from acklab.workload.spec import id_width


cdef inline void write_digits(char* at, unsigned long long number, Py_ssize_t width) noexcept:
    cdef Py_ssize_t i
    for i in range(width - 1, -1, -1):
        at[i] = <char>(48 + number % 10)
        number //= 10


cdef long long parse_id(object value, Py_ssize_t width):
    """The id in the first `width` bytes of `value`, or -1 if they are not all decimal digits."""
    cdef const unsigned char* digits
    cdef long long number = 0
    cdef Py_ssize_t i
    cdef unsigned char digit
    if type(value) is not bytes or len(<bytes>value) < width:
        return -1
    digits = <const unsigned char*>PyBytes_AS_STRING(value)
    for i in range(width):
        digit = digits[i] - 48
        if digit > 9:
            return -1
        number = number * 10 + digit
    return number


cdef class ValueFormat:
    """Values of exactly `size` bytes carrying an id and a per-key sequence number, `width` digits each."""

    cdef readonly Py_ssize_t width
    cdef readonly Py_ssize_t size
    cdef bytes template

    def __init__(self, Py_ssize_t width, Py_ssize_t size):
        if width < 1 or size < 2 * width + 2:
            raise ValueError(f"a value of {size} bytes cannot hold an id and seq of {width} digits each")
        self.width, self.size = width, size
        self.template = b"0" * width + b":" + b"0" * width + b":" + b"x" * (size - 2 * width - 2)

    @classmethod
    def for_ids(cls, max_id: int, size: int) -> ValueFormat:
        width = id_width(max_id)
        if size < 2 * width + 2:
            raise ValueError(f"message_bytes ({size}) must be >= {2 * width + 2} to hold the id and seq of {max_id + 1} messages")
        return cls(width, size)

    def values(self, unsigned long long base_id, unsigned long long lo, unsigned long long hi, unsigned long long keys) -> list:
        """Values of a producer's messages `lo .. hi - 1` (id = base_id + index, seq = index // keys)."""
        cdef list values = []
        cdef unsigned long long index
        cdef char* at
        cdef const char* template = PyBytes_AS_STRING(self.template)
        for index in range(lo, hi):
            value = PyBytes_FromStringAndSize(NULL, self.size)
            at = PyBytes_AS_STRING(value)
            memcpy(at, template, self.size)
            write_digits(at, base_id + index, self.width)
            write_digits(at + self.width + 1, index // keys, self.width)
            values.append(value)
        return values


cdef class Sender:
    """Hands records to a producer's `produce(topic, value, key)`, in order. `position` is the index
    of the record being handed over: after an exception, the one `produce()` raised it for."""

    cdef object produce
    cdef readonly Py_ssize_t position

    def __init__(self, produce):
        self.produce, self.position = produce, 0

    def send(self, list values, list keys, list topics, Py_ssize_t start, Py_ssize_t stop):
        """`produce(topics[j], values[j], keys[j])` for j = start .. stop - 1; returns stop."""
        cdef Py_ssize_t j
        if start < 0 or stop > len(values) or stop > len(keys) or stop > len(topics):
            raise IndexError(f"records {start}..{stop - 1} of {len(values)} values, {len(keys)} keys and {len(topics)} topics")
        for j in range(start, stop):
            self.position = j
            self.produce(topics[j], values[j], keys[j])
        return stop


cdef class ReportSink:
    """A producer's delivery callback (`on_delivery`) and the reports it served since the last
    `clear()`: `ids[:count]` (parsed from the values; -1 for a value that carries none),
    `partitions[:count]` and `offsets[:count]` (-1 where confluent-kafka reports None) in the order
    they came, and `failures` as (position, error). Reports beyond the capacity are not kept but
    counted in `overflow`: a producer gets one report per message it sent. The arrays are refilled
    from the start after each `clear()`, so only the pages of the most reports ever pending at once
    are touched."""

    cdef readonly object ids
    cdef readonly object partitions
    cdef readonly object offsets
    cdef readonly list failures
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t overflow
    cdef long long[::1] _ids
    cdef int[::1] _partitions
    cdef long long[::1] _offsets
    cdef Py_ssize_t width
    cdef object value, partition, offset  # Message's methods, called without a lookup per report

    def __init__(self, Py_ssize_t capacity, ValueFormat format):
        self.ids = np.empty(capacity, dtype=np.int64)
        self.partitions = np.empty(capacity, dtype=np.int32)
        self.offsets = np.empty(capacity, dtype=np.int64)
        self._ids, self._partitions, self._offsets = self.ids, self.partitions, self.offsets
        self.failures = []
        self.count = self.overflow = 0
        self.width = format.width
        self.value, self.partition, self.offset = Message.value, Message.partition, Message.offset

    def on_delivery(self, err, msg):
        """confluent-kafka's delivery callback."""
        cdef Py_ssize_t n = self.count
        if n >= self._ids.shape[0]:
            self.overflow += 1
            return
        self._ids[n] = parse_id(self.value(msg), self.width)
        partition = self.partition(msg)
        self._partitions[n] = -1 if partition is None else partition
        offset = self.offset(msg)
        self._offsets[n] = -1 if offset is None else offset
        if err is not None:
            self.failures.append((n, err))
        self.count = n + 1

    def clear(self):
        """Forget the reports kept so far (the arrays are reused)."""
        self.count = 0
        self.failures = []


cdef bint parse_prefix_at(const unsigned char* data, Py_ssize_t size, long long* id_, long long* seq) noexcept:
    """Whether data[:size] starts with `<digits>:<digits>:` within its first PREFIX_BYTES bytes, both
    numbers in int64 (leading zeros allowed); if so they are stored in `id_` and `seq`."""
    cdef Py_ssize_t limit = size if size < PREFIX_BYTES else PREFIX_BYTES
    cdef Py_ssize_t i = 0, start
    cdef long long number
    cdef long long numbers[2]
    cdef int field, digit
    for field in range(2):
        number, start = 0, i
        while i < limit and 48 <= data[i] <= 57:
            digit = data[i] - 48
            if number > (INT64_MAX - digit) // 10:
                return False
            number = number * 10 + digit
            i += 1
        if i == start or i >= limit or data[i] != 58:
            return False
        numbers[field] = number
        i += 1
    id_[0], seq[0] = numbers[0], numbers[1]
    return True


def parse_prefix(value):
    """(id, seq) from a value starting with `<id>:<seq>:` (see `parse_prefix_at`), else (None, None)."""
    cdef long long id_, seq
    if type(value) is bytes and parse_prefix_at(<const unsigned char*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), &id_, &seq):
        return id_, seq
    return None, None


def read_back(list messages, dict topics, dict keys, list ends):
    """The records among `messages` (a consumer's confluent-kafka Messages) as numpy columns:
    `topic` (its index in `topics`, a dict topic -> index), `partition`, `offset`, `key` (its index in
    `keys`, a dict key bytes -> index that new keys are added to; -1 for none), `id` and `seq` (-1 when
    the value has no `<id>:<seq>:` prefix). A partition-EOF event appends (topic, partition) to `ends`;
    any other error raises KafkaException."""
    cdef Py_ssize_t n = len(messages), count = 0
    topic_ = np.empty(n, dtype=np.int32)
    partition_ = np.empty(n, dtype=np.int32)
    offset_ = np.empty(n, dtype=np.int64)
    key_ = np.empty(n, dtype=np.int32)
    id_ = np.empty(n, dtype=np.int64)
    seq_ = np.empty(n, dtype=np.int64)
    cdef int[::1] topic_v = topic_, partition_v = partition_, key_v = key_
    cdef long long[::1] offset_v = offset_, id_v = id_, seq_v = seq_
    cdef long long parsed_id, parsed_seq
    get_error, get_topic, get_partition = Message.error, Message.topic, Message.partition
    get_offset, get_key, get_value = Message.offset, Message.key, Message.value
    eof = KafkaError._PARTITION_EOF
    for message in messages:
        error = get_error(message)
        if error is not None:
            if error.code() == eof:
                ends.append((get_topic(message), get_partition(message)))
                continue
            raise KafkaException(error)
        topic_v[count] = topics[get_topic(message)]
        partition_v[count] = get_partition(message)
        offset_v[count] = get_offset(message)
        key = get_key(message)
        if key is None:
            key_v[count] = -1
        else:
            index = keys.get(key)
            if index is None:
                index = keys[key] = len(keys)
            key_v[count] = index
        value = get_value(message)
        if type(value) is bytes and parse_prefix_at(<const unsigned char*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), &parsed_id, &parsed_seq):
            id_v[count], seq_v[count] = parsed_id, parsed_seq
        else:
            id_v[count] = seq_v[count] = -1
        count += 1
    return {name: column[:count] for name, column in (
        ("topic", topic_), ("partition", partition_), ("offset", offset_), ("key", key_), ("id", id_), ("seq", seq_)
    )}

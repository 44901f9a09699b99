"""The proxy's behaviours, one module each, registered by name (`BEHAVIOURS`): each module is the
only home of its behaviour's options model, defaults and evidence counters (`base.Behaviour`)."""

from __future__ import annotations

from collections.abc import Mapping

from acklab.proxy.behaviours import (
    blackhole,
    delay_response,
    drop_request,
    drop_response,
    hold_request,
    inject_error,
    lose_then_reject,
    plant_duplicate,
    plant_loss,
    plant_misroute,
    plant_offset,
    plant_reorder,
    replace_error,
    stall_write,
)
from acklab.proxy.behaviours.base import Behaviour

BEHAVIOURS: Mapping[str, Behaviour] = {
    module.BEHAVIOUR.name: module.BEHAVIOUR
    for module in (
        drop_response, drop_request, delay_response, blackhole, inject_error, replace_error, hold_request, lose_then_reject,
        plant_loss, plant_duplicate, plant_offset, plant_misroute, plant_reorder, stall_write,
    )
}

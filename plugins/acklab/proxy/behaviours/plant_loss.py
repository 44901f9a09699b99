"""plant_loss: a PRODUCE request never reaches the broker; the proxy answers it as appended, in the
broker's name, and logs each swallowed partition (`swallowed`)."""

from __future__ import annotations

from acklab.proxy.behaviours.base import Behaviour, Options


class PlantLossOptions(Options):
    """The planted loss takes no options: it swallows every PRODUCE request it can count."""


BEHAVIOUR = Behaviour("plant_loss", PlantLossOptions, ("swallowed_requests",), log="swallowed")

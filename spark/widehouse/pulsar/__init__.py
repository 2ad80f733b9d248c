"""Pulsar: topic names and the admin REST client (the Spark source is :mod:`widehouse.source`)."""

from __future__ import annotations

from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.topics import TopicName

__all__ = ["PulsarAdmin", "TopicName"]

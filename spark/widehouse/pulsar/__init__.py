"""Pulsar: topic names, the admin REST client, and (under widehouse.spark) the Spark source."""

from __future__ import annotations

from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.topics import TopicName

__all__ = ["PulsarAdmin", "TopicName"]

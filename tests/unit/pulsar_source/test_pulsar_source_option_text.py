"""What the source's and sink's option parsers share: the spelling of option names, topic-keyed JSON.

Expected messages are written out by hand.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from widehouse.errors import ConfigError
from widehouse.settings import PulsarSettings
from widehouse.source.handover import parse_marks
from widehouse.source.offsets import parse_offset_spec
from widehouse.source.options import parse_options
from widehouse.source.sink_options import parse_sink_options

PULSAR = PulsarSettings("pulsar://broker:6650", "http://broker:8080", None)
A = "persistent://t/ns/a"


def test_option_names_are_case_insensitive_for_the_source_and_the_sink() -> None:
    assert parse_options({"TOPICS": A, "mintasks": "3"}, PULSAR, batch=True).min_tasks == 3
    assert parse_sink_options({"TOPIC": A, "maxpendingmessages": "9"}, PULSAR).max_pending == 9


def test_an_unknown_option_suggests_the_closest_known_one() -> None:
    with pytest.raises(
        ConfigError, match=r"^unknown option 'minTask' for the pulsar source; did you mean minTasks\? "
    ):
        parse_options({"topics": A, "minTask": "3"}, PULSAR, batch=True)
    with pytest.raises(
        ConfigError, match=r"^unknown option 'topc' for the pulsar sink; did you mean topic\? "
    ):
        parse_sink_options({"topc": A}, PULSAR)
    with pytest.raises(ConfigError, match=r"^unknown option 'zzzzzz' for the pulsar sink; known options: "):
        parse_sink_options({"topic": A, "zzzzzz": "1"}, PULSAR)


def _offsets(text: str) -> object:
    return parse_offset_spec(text, "startingOffsets")


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (_offsets, "{oops", r"^option startingOffsets='\{oops' is not valid JSON: "),
        (_offsets, "{}x", r"^option startingOffsets='\{\}x' is not valid JSON: "),
        (_offsets, '{"nota topic": "earliest"}', r"^option startingOffsets: "),
        (parse_marks, "[1]", r"^option startAfter must be a JSON object of topic -> partition -> mark$"),
        (parse_marks, "{oops", r"^option startAfter is not valid JSON: "),
        (parse_marks, '{"nota topic": {}}', r"^option startAfter: "),
    ],
)
def test_bad_topic_keyed_json_names_the_option(
    parse: Callable[[str], object], text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(text)

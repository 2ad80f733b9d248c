"""The Pulsar source's driver and executor sides against the real broker, without Spark.

Exact positions from the broker index (across batch entries and ledgers), discovery, admission
control per trigger, data loss, subscription cursors that follow commits, and cleanup of the
subscriptions of dead apps.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.pulsar_support import drop_namespace, publish
from widehouse.cli import main as cli_main
from widehouse.errors import PulsarError
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.positions import Mark, Position, TopicPartition
from widehouse.settings import Settings
from widehouse.source.broker import BrokerView, DataLossError, TopicSelector
from widehouse.source.cleanup import cleanup
from widehouse.source.controller import StreamController
from widehouse.source.offsets import SourceOffset
from widehouse.source.options import parse_options
from widehouse.source.reader import read_task
from widehouse.source.subscriptions import PROP_APP, PROP_HEARTBEAT, SubscriptionKeeper

pytestmark = pytest.mark.integration


def all_message_ids(client: Any, topic: str) -> list[tuple[int, int, int]]:
    import pulsar

    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    ids = []
    while reader.has_message_available():
        mid = reader.read_next(10_000).message_id()
        ids.append((mid.ledger_id(), mid.entry_id(), mid.batch_index()))
    reader.close()
    return ids


def consumed_through(ids: list[tuple[int, int, int]], i: int) -> Position:
    """The position meaning "consumed through message i" (a whole entry when i ends its entry)."""
    ledger, entry, batch = ids[i]
    last_of_entry = i + 1 == len(ids) or ids[i + 1][:2] != (ledger, entry)
    return Position(ledger, entry) if batch < 0 or last_of_entry else Position(ledger, entry, batch)


def run_batches(controller: StreamController, budget: int | None, start: dict[str, Any] | None = None) -> Any:
    """Plan and read batches until nothing is left; yields (end offset, payloads) per batch."""
    offset = start or controller.initial_offset()
    for _ in range(100):
        end = controller.latest_offset(offset, budget)
        if end == offset:
            return
        payloads = []
        for task in controller.plan(offset, end):
            for batch in read_task(task, controller.options.read_config):
                payloads += [v.decode() for v in batch.column("value").to_pylist()]
        yield end, payloads
        controller.commit(end)
        offset = end
    raise AssertionError("never caught up")


def test_locate_is_exact_across_batch_entries_and_ledgers(services: Settings, ns: str, client: Any) -> None:
    topic = f"persistent://{ns}/mixed"
    tp = TopicPartition(topic, -1)
    with PulsarAdmin(services.pulsar) as admin:
        publish(client, topic, 20)
        admin.request("PUT", f"persistent/{ns}/mixed/unload")  # the next messages go to a new ledger
        publish(client, topic, 50, batch=7, tag="b")
        admin.request("PUT", f"persistent/{ns}/mixed/unload")
        publish(client, topic, 10, tag="c")
    ids = all_message_ids(client, topic)
    assert len(ids) == 80 and len({i[0] for i in ids}) == 3  # three ledgers
    view = BrokerView(services.pulsar)
    try:
        last = view.last_entries([tp])[0][tp]
        assert last is not None and last.index == 79
        first = view.first_entries([tp])[0][tp]
        assert first is not None and first.first_index == 0
        earliest = view.earliest_mark(tp, first)
        assert earliest == Mark(None, -1)
        for target in (0, 1, 19, 20, 21, 26, 27, 33, 55, 69, 70, 78):
            expected = Mark(consumed_through(ids, target), target)
            assert view.locate(tp, earliest, last.mark, target) == expected, target
        inside = Mark(consumed_through(ids, 22), 22)  # a mark inside a batch entry as the lower bound
        assert inside.position is not None and inside.position.batch >= 0
        assert view.locate(tp, inside, last.mark, 23) == Mark(consumed_through(ids, 23), 23)
        assert view.locate(tp, inside, last.mark, 60) == Mark(consumed_through(ids, 60), 60)
        for target in (1, 20, 24, 70):  # the mark before a given message id
            ledger, entry, batch = ids[target]
            assert view.mark_before(tp, Position(ledger, entry, batch)) == Mark(
                consumed_through(ids, target - 1), target - 1
            )
        assert view.mark_before(tp, Position(*ids[0])) == Mark(None, -1)
    finally:
        view.close()


def test_locate_lists_the_ledgers_again_only_when_the_kept_list_lacks_the_end(
    services: Settings, ns: str, client: Any
) -> None:
    """The ledger list (``internalStats``) is kept per partition: a batch whose end is in it asks no
    more; the open ledger grown past it, a new ledger, or a kept list that turns out stale is
    listed again. Every answer is checked against the ids a reader sees."""
    topic = f"persistent://{ns}/kept"
    tp = TopicPartition(topic, -1)
    publish(client, topic, 30, batch=4)
    view = BrokerView(services.pulsar)
    listings: list[str] = []
    listed = view.ledgers

    def counting(part: TopicPartition) -> list[tuple[int, int]]:
        listings.append(part.name)
        return listed(part)

    view.ledgers = counting  # type: ignore[method-assign]
    try:

        def check(targets: tuple[int, ...], want_listings: int) -> None:
            ids = all_message_ids(client, topic)
            last = view.last_entries([tp])[0][tp]
            assert last is not None
            for target in targets:
                assert view.locate(tp, Mark(None, -1), last.mark, target) == Mark(
                    consumed_through(ids, target), target
                ), target
            assert len(listings) == want_listings

        check((3, 10, 17), 1)  # one listing for three locates
        check((5, 21), 1)  # the same end: still none
        publish(client, topic, 10, tag="b")  # the open ledger grows past the kept count
        check((33, 12), 2)
        with PulsarAdmin(services.pulsar) as admin:
            admin.request("PUT", f"persistent/{ns}/kept/unload")  # the next messages go to a new ledger
        publish(client, topic, 10, tag="c")
        check((45, 2), 3)
        check((44, 29), 3)
        # a stale kept list (here: one that lacks the first ledger) is listed again, not trusted
        kept = view._tables[tp]
        view._tables[tp] = type(kept)(list(zip(kept.ids[1:], kept.counts[1:], strict=True)))
        check((1,), 4)
        view.forget([tp])  # the controller's call for a partition that is gone
        check((1,), 5)
    finally:
        view.close()


@pytest.mark.parametrize("pipelined", [True, False])
def test_many_partitions_are_located_side_by_side(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch, pipelined: bool
) -> None:
    """A batch's cut partitions are located together: their ledger lists (a query's first batch, a
    ledger rolled over since) and each round of probes go out pipelined, nothing through the admin
    client. The marks are the ones a reader's ids give, and the same with the pipelined path off
    (every listing and probe then through the client)."""
    topic = f"persistent://{ns}/cut"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 3)
        for p in range(3):
            publish(client, f"{topic}-partition-{p}", 12 + p, batch=5)
            admin.request("PUT", f"persistent/{ns}/cut-partition-{p}/unload")  # a second ledger
            publish(client, f"{topic}-partition-{p}", 20, tag="b")
    parts = [TopicPartition(topic, p) for p in range(3)]
    ids = {tp: all_message_ids(client, tp.name) for tp in parts}
    if not pipelined:
        monkeypatch.setattr(PulsarAdmin, "pipelined", lambda self, calls, connections=16: None)
    probes: list[str] = []
    respond = PulsarAdmin.response

    def counted(self: PulsarAdmin, method: str, path: str, **call: Any) -> Any:
        if "/ledger/" in path or path.endswith("/internalStats"):
            probes.append(path)
        return respond(self, method, path, **call)

    monkeypatch.setattr(PulsarAdmin, "response", counted)
    view = BrokerView(services.pulsar)
    try:
        last, _ = view.last_entries(parts)

        def located(targets: list[int]) -> None:
            asks = [(tp, Mark(None, -1), last[tp].mark, t) for tp, t in zip(parts, targets, strict=True)]
            assert view.locate_all(asks) == [
                Mark(consumed_through(ids[tp], t), t) for tp, t in zip(parts, targets, strict=True)
            ], targets

        def listed() -> int:
            return sum(p.endswith("/internalStats") for p in probes)

        located([3, 14, 30])  # the first locate of a partition needs its ledger list
        if pipelined:  # the one search left running last may finish through the client
            assert listed() == 0 and len(probes) <= 2, probes
        else:
            assert listed() == 3 and any("/ledger/" in p for p in probes)
        probes.clear()
        for targets in ([1, 2, 3], [11, 12, 13], [12, 20, 33], [31, 32, 33]):
            located(targets)  # [31, 32, 33]: every last message, answered without a probe
        assert (probes == []) if pipelined else bool(probes)
        # a ledger rolled over on every partition: the kept lists end too early and are listed again
        with PulsarAdmin(services.pulsar) as admin:
            for tp in parts:
                admin.request("PUT", f"persistent/{ns}/cut-partition-{tp.partition}/unload")
                publish(client, tp.name, 6, tag="c")
        ids = {tp: all_message_ids(client, tp.name) for tp in parts}
        last, _ = view.last_entries(parts)
        probes.clear()
        located([36, 37, 38])
        if pipelined:
            assert listed() == 0 and len(probes) <= 2, probes
        else:
            assert listed() == 3
    finally:
        view.close()


def test_discovery_by_list_pattern_and_partition(services: Settings, ns: str, client: Any) -> None:
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(f"persistent://{ns}/orders", 2)
        publish(client, f"persistent://{ns}/clicks", 1)
        publish(client, f"persistent://{ns}/other", 1)
        view = BrokerView(services.pulsar)
        try:
            pattern = TopicSelector(pattern="(orders|clicks)", namespaces=(ns,))
            assert view.discover(pattern) == {
                TopicPartition(f"persistent://{ns}/orders", 0),
                TopicPartition(f"persistent://{ns}/orders", 1),
                TopicPartition(f"persistent://{ns}/clicks", -1),
            }
            listed = TopicSelector(
                topics=(f"persistent://{ns}/orders-partition-1", f"persistent://{ns}/nope")
            )
            assert view.discover(listed) == {TopicPartition(f"persistent://{ns}/orders", 1)}
            admin.ensure_partitions(f"persistent://{ns}/orders", 3)
            assert TopicPartition(f"persistent://{ns}/orders", 2) in view.discover(pattern)
        finally:
            view.close()


def test_namespaces_are_listed_pipelined(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery lists a pattern's namespaces pipelined (once per batch), not through the admin
    client; a namespace that does not exist is still the admin client's refusal, named."""
    other = f"{ns}-b"
    sent: list[str] = []
    respond = PulsarAdmin.response

    def counted(self: PulsarAdmin, method: str, path: str, **call: Any) -> Any:
        sent.append(f"{method} {path}")
        return respond(self, method, path, **call)

    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_namespace(other)
        try:
            admin.ensure_partitions(f"persistent://{ns}/orders", 2)
            publish(client, f"persistent://{other}/orders", 1)
            view = BrokerView(services.pulsar)
            monkeypatch.setattr(PulsarAdmin, "response", counted)
            try:
                both = TopicSelector(pattern="orders", namespaces=(ns, other))
                assert view.discover(both) == {
                    TopicPartition(f"persistent://{ns}/orders", 0),
                    TopicPartition(f"persistent://{ns}/orders", 1),
                    TopicPartition(f"persistent://{other}/orders", -1),
                }
                assert sent == []
                missing = TopicSelector(pattern="orders", namespaces=(ns, f"{ns}-missing"))
                with pytest.raises(PulsarError, match=f"namespace {ns}-missing"):
                    view.discover(missing)
                assert sent == [f"GET persistent/{ns}-missing"]  # only the refused one, through the client
            finally:
                view.close()
        finally:
            monkeypatch.undo()
            drop_namespace(admin, other)


def namespace_controller(services: Settings, ns: str, app: str, **options: str) -> StreamController:
    """The source's controller over every topic of ``ns``, from the earliest message, as ``app``."""
    everything = {"topicsPattern": ".*", "namespaces": ns, "appId": app, "startingOffsets": "earliest"}
    return StreamController(parse_options({**everything, **options}, services.pulsar))


def read_namespace_once(services: Settings, ns: str, app: str) -> list[str]:
    """Every message of ``ns`` as one batch plans and reads it (its readers stay kept), decoded."""
    controller = namespace_controller(services, ns, app, durableSubscription="false")
    try:
        start = controller.initial_offset()
        tasks = controller.plan(start, controller.latest_offset(start, None))
    finally:
        controller.stop()
    config = controller.options.read_config
    return [v.decode() for t in tasks for b in read_task(t, config) for v in b.column("value").to_pylist()]


def test_admission_per_trigger_floor_and_exactly_once(services: Settings, ns: str, client: Any) -> None:
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(f"persistent://{ns}/big", 3)
    sent = publish(client, f"persistent://{ns}/big", 900, batch=10)
    sent += publish(client, f"persistent://{ns}/mid", 150)
    sent += publish(client, f"persistent://{ns}/tiny", 5)
    controller = namespace_controller(services, ns, "adm", minMessagesPerTopic="20", messagesPerTask="100")
    try:
        got: list[str] = []
        batches = list(run_batches(controller, budget=200))
        for end, payloads in batches:
            assert len(payloads) <= 200
            got += payloads
            metrics = {m.topic.rsplit("/", 1)[1]: m for m in _metrics(end)}
            assert sum(m.rows for m in metrics.values()) == len(payloads)
        first_topics = {p.split("#")[0].rsplit("/", 1)[1] for p in batches[0][1]}
        assert first_topics == {"big", "mid", "tiny"}  # the floor: no topic waits for the big one
        assert [len(p) for _, p in batches[:5]] == [200, 200, 200, 200, 200]
        assert sorted(got) == sorted(sent) and len(got) == len(set(got))
        report = controller.report_latest()
        assert report is not None and report["backlog"] == 0
    finally:
        controller.stop()


def publish_uneven(client: Any, topic: str) -> list[str]:
    """450 messages on entries of uneven sizes, where the broker index interpolates badly: a
    60-message entry, then 15 entries of one message, six times. Returns the payloads in order."""
    sent: list[str] = []
    for round_ in range(6):
        sent += publish(client, topic, 60, batch=60, tag=f"{round_}b")
        sent += publish(client, topic, 15, tag=f"{round_}s")
    return sent


def test_with_cut_slack_a_batch_may_fall_short_of_its_budget_and_reads_everything_once(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cutSlack``: a cut partition may end up to that share of its take short, at an entry the
    search probed. On entries of uneven sizes (the broker index interpolates badly there) each batch
    stays within the budget and takes at least ``1 - cutSlack`` of it, the searches probe less than
    exact cuts do, and every message is read once, in order."""
    sent = publish_uneven(client, f"persistent://{ns}/uneven")
    probes: list[str] = []
    pipelined = PulsarAdmin.pipelined
    respond = PulsarAdmin.response

    def counted_pipelined(self: PulsarAdmin, calls: Any, connections: int = 16) -> Any:
        probes.extend(c.path for c in calls if "/ledger/" in c.path)
        return pipelined(self, calls, connections)

    def counted(self: PulsarAdmin, method: str, path: str, **call: Any) -> Any:
        if "/ledger/" in path:
            probes.append(path)
        return respond(self, method, path, **call)

    monkeypatch.setattr(PulsarAdmin, "pipelined", counted_pipelined)
    monkeypatch.setattr(PulsarAdmin, "response", counted)
    sizes: dict[str, list[int]] = {}
    asked: dict[str, int] = {}
    for slack in ("0", "0.3"):
        probes.clear()
        controller = namespace_controller(services, ns, f"slack{slack[-1]}", cutSlack=slack)
        try:
            batches = list(run_batches(controller, budget=100))
        finally:
            controller.stop()
        got = [payload for _, payloads in batches for payload in payloads]
        assert got == sent, slack  # once each, in order
        sizes[slack], asked[slack] = [len(p) for _, p in batches], len(probes)
    assert sizes["0"] == [100] * 4 + [50], sizes
    assert all(70 <= n <= 100 for n in sizes["0.3"][:-1]), sizes
    assert min(sizes["0.3"][:-1]) < 100, sizes  # some cut ended at an entry short of the budget
    assert asked["0.3"] < asked["0"], asked


def test_a_drain_with_cut_slack_takes_no_batch_more_than_exact_cuts(
    services: Settings, ns: str, client: Any
) -> None:
    """``AvailableNow`` with ``cutSlack``: on the uneven entries where slack makes a stream's batches
    fall short, a drain that fills its batches exactly (450 messages in budgets of 90) takes five
    batches of 90, and one with room to spare (budgets of 100) still takes five; every message is
    read once, in order."""
    sent = publish_uneven(client, f"persistent://{ns}/uneven")
    sizes: dict[int, list[int]] = {}
    for budget in (90, 100):
        controller = namespace_controller(services, ns, f"drain{budget}", cutSlack="0.3")
        try:
            controller.prepare_available_now()
            batches = list(run_batches(controller, budget=budget))
        finally:
            controller.stop()
        assert [payload for _, payloads in batches for payload in payloads] == sent, budget
        sizes[budget] = [len(p) for _, p in batches]
    assert sizes[90] == [90] * 5, sizes
    assert len(sizes[100]) == 5 and all(n <= 100 for n in sizes[100]), sizes


def test_a_budget_over_many_partitions_reads_whole_ones_in_turn(
    services: Settings, ns: str, client: Any
) -> None:
    """Past ``maxCutPartitions`` partly read partitions (a broker lookup each), whole partitions take
    turns: each batch cuts at most one, fills the budget, and every message is read once."""
    topic = f"persistent://{ns}/wide"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 12)
    sent = publish(client, topic, 360, batch=5)
    options = parse_options(
        {"topics": topic, "appId": "cuts", "startingOffsets": "earliest", "maxCutPartitions": "2"},
        services.pulsar,
    )
    controller = StreamController(options)
    try:
        got: list[str] = []
        batches = list(run_batches(controller, budget=70))
        for end, payloads in batches:
            got += payloads
            entries = SourceOffset.from_json(end).partitions.values()
            assert sum(1 for e in entries if e.rows > 0 and e.lag > 0) <= 1  # at most one cut
        assert [len(p) for _, p in batches] == [70, 70, 70, 70, 70, 10]
        assert sorted(got) == sorted(sent) and len(got) == len(set(got))
    finally:
        controller.stop()


def test_available_now_reads_to_the_prepared_ends_without_examining_them_again(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AvailableNow``: the first batch ends at the ends the preparation examined (not at messages
    published after it), and does not ask the broker for them a second time (a REST call per
    partition: ~1 s of a 1,000-topic app's start-up)."""
    topic = f"persistent://{ns}/now"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 3)
    sent = publish(client, topic, 90)
    controller = namespace_controller(services, ns, "now")
    asked: list[list[int]] = []
    examine = controller.view.last_entries

    def counted(parts: Any) -> Any:
        asked.append(sorted(tp.partition for tp in parts))
        return examine(parts)

    monkeypatch.setattr(controller.view, "last_entries", counted)
    try:
        controller.prepare_available_now()
        publish(client, topic, 30, tag="late")  # after the preparation: not this run's
        batches = run_batches(controller, budget=None)
        end, payloads = next(batches)
        assert asked == [[0, 1, 2], []]  # the preparation asked; the first batch did not ask again
        assert sorted(payloads) == sorted(sent)
        assert list(batches) == []  # nothing past the prepared ends
        assert all(e.lag == 0 for e in SourceOffset.from_json(end).partitions.values())
    finally:
        controller.stop()


@pytest.mark.parametrize("durable", [True, False], ids=["consumers-attached", "no-consumers"])
def test_available_now_asks_no_end_again_after_its_preparation(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch, durable: bool
) -> None:
    """``AvailableNow`` with a budget of one partition per batch: once the preparation has examined
    the ends, no batch asks the broker for a partition's end again, neither its last message id
    (the keeper's consumers) nor its last entry (REST: while a 1,000-partition app's subscriptions
    were being set up, a thousand examinations at its second trigger). Every message is still read
    once, and messages published after the preparation are left to the next run, lag included."""
    topic = f"persistent://{ns}/turns"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 3)
    sent = [m for i in range(3) for m in publish(client, f"{topic}-partition-{i}", 30)]
    controller = namespace_controller(
        services, ns, "turns", maxCutPartitions="1", durableSubscription=str(durable).lower()
    )
    keeper = controller.keeper
    assert (keeper is not None) == durable
    asked: list[list[int]] = []
    examined: list[list[int]] = []
    last_entries = controller.view.last_entries

    def examine(parts: Any) -> Any:
        parts = list(parts)
        examined.append(sorted(tp.partition for tp in parts))
        return last_entries(parts)

    monkeypatch.setattr(controller.view, "last_entries", examine)
    if keeper is not None:
        last_positions = keeper.last_positions

        def ask(parts: Any) -> Any:
            parts = list(parts)
            asked.append(sorted(tp.partition for tp in parts))
            return last_positions(parts)

        monkeypatch.setattr(keeper, "last_positions", ask)
    try:
        controller.prepare_available_now()
        if keeper is not None:  # the consumers are there to answer (a running app's set-up is later)
            keeper.attach(
                {tp: Mark(None, -1) for tp in controller.view.discover(controller.options.selector)}
            )
        publish(client, topic, 30, tag="late")  # after the preparation: not this run's
        got: list[str] = []
        batches = list(run_batches(controller, budget=30))
        for _end, payloads in batches:
            got += payloads
        assert [len(p) for _, p in batches] == [30, 30, 30]
        assert sorted(got) == sorted(sent)
        assert asked == []  # consumers that could answer were not asked
        assert [parts for parts in examined if parts] == [[0, 1, 2]]  # the preparation's only
        lags = [e.lag for end, _ in batches for e in SourceOffset.from_json(end).partitions.values()]
        assert lags[-3:] == [0, 0, 0]  # counted to the prepared ends
    finally:
        controller.stop()


def test_ends_and_subscriptions_of_many_partitions_are_asked_pipelined(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker's answers for many partitions come through ``widehouse.pulsar.bulk``, not one
    admin request each: the same entries, empty and missing partitions as such; a subscription that
    already exists is still moved to where the run starts and marked alive, pipelined too."""
    full, empty = f"persistent://{ns}/full", f"persistent://{ns}/empty"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(full, 3)
        admin.ensure_partitions(empty, 1)
    for partition in range(3):
        publish(client, f"{full}-partition-{partition}", 4 + partition)
    parts = [TopicPartition(full, p) for p in range(3)] + [TopicPartition(empty, 0)]
    gone = TopicPartition(f"persistent://{ns}/gone", 0)
    sent: list[str] = []
    respond = PulsarAdmin.response

    def counted(self: PulsarAdmin, method: str, path: str, **call: Any) -> Any:
        sent.append(f"{method} {path}")
        return respond(self, method, path, **call)

    monkeypatch.setattr(PulsarAdmin, "response", counted)
    view = BrokerView(services.pulsar)
    try:
        last, missing = view.last_entries([*parts, gone])
        first, _ = view.first_entries(parts)
        assert [last[tp].index if last[tp] else None for tp in parts] == [3, 4, 5, None]
        assert [first[tp].first_index if first[tp] else None for tp in parts] == [0, 0, 0, None]
        assert missing == {gone}
        assert sent == []  # no request through the admin client
        with PulsarAdmin(services.pulsar) as admin:  # an earlier run's subscription, moved to the end
            assert admin.create_subscription(parts[0].name, "widehouse-piped", None)
            admin.reset_cursor(parts[0].name, "widehouse-piped", last[parts[0]].position)
        sent.clear()
        keeper = SubscriptionKeeper(services.pulsar, "piped", view, heartbeat_interval_s=0)
        try:
            keeper.attach({tp: Mark(None, -1) for tp in parts})
            assert keeper.attached == set(parts)
            # the three new ones were created pipelined, the existing one reset pipelined
            assert sent == []
            with PulsarAdmin(services.pulsar) as admin:
                backlogs = [
                    admin.topic_stats(tp.name)["subscriptions"]["widehouse-piped"]["msgBacklog"]
                    for tp in parts
                ]
                props = [admin.subscription_properties(tp.name, "widehouse-piped") for tp in parts[:2]]
            assert backlogs == [4, 5, 6, 0]  # every one at the earliest message, the existing one reset
            for found in props:  # the created one's and the existing one's (created without any)
                assert found[PROP_APP] == "piped" and int(found[PROP_HEARTBEAT]) > 0
        finally:
            keeper.close()
    finally:
        view.close()


def _metrics(end: dict[str, Any]) -> Any:
    from widehouse.source.offsets import topic_metrics

    return topic_metrics(SourceOffset.from_json(end))


def test_cursor_follows_commits_and_new_partitions_start_at_earliest(
    services: Settings, ns: str, client: Any
) -> None:
    topic = f"persistent://{ns}/t"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 1)
        sent = publish(client, topic, 100)
        options = parse_options(
            {"topics": topic, "appId": "cur", "startingOffsets": "earliest"}, services.pulsar
        )
        controller = StreamController(options)
        try:
            start = controller.initial_offset()
            end = controller.latest_offset(start, 30)
            sub = "widehouse-cur"
            part0 = f"{topic}-partition-0"
            assert controller.keeper is not None
            controller.keeper.settle()  # set up on the keeper's thread, not the trigger's
            assert admin.topic_stats(part0)["subscriptions"][sub]["msgBacklog"] == 100  # at earliest
            controller.commit(end)
            mark = SourceOffset.from_json(end).partitions[TopicPartition(topic, 0)].mark
            assert mark.position is not None
            _wait_for(
                lambda: (
                    admin.internal_stats(part0)["cursors"][sub]["markDeletePosition"]
                    == f"{mark.position.ledger}:{mark.position.entry}"
                )
            )
            # grow the topic: the new partition is read from its earliest message
            admin.ensure_partitions(topic, 2)
            sent += publish(client, topic, 40, tag="grown")
            got = [p for _, batch in run_batches(controller, None, end) for p in batch]
            assert sorted(got) == sorted(sent[30:])
            # idle: the last batch is committed although Spark never calls commit for it
            for partition in (0, 1):
                name = f"{topic}-partition-{partition}"
                _wait_for(lambda name=name: admin.topic_stats(name)["subscriptions"][sub]["msgBacklog"] == 0)
        finally:
            controller.stop()


def _wait_for(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.3)


@pytest.mark.parametrize("fail", [True, False])
def test_a_deleted_topic_with_unread_messages_is_data_loss(
    services: Settings, ns: str, client: Any, fail: bool
) -> None:
    topics = [f"persistent://{ns}/keep", f"persistent://{ns}/gone"]
    for topic in topics:
        publish(client, topic, 10)
    options = parse_options(
        {
            "topics": ",".join(topics),
            "appId": f"loss-{fail}",
            "startingOffsets": "earliest",
            "failOnDataLoss": str(fail).lower(),
            "minMessagesPerTopic": "2",
        },
        services.pulsar,
    )
    controller = StreamController(options)
    try:
        start = controller.initial_offset()
        end = controller.latest_offset(start, 10)  # 5 of each: 5 left unread on each
        controller.commit(end)
        with PulsarAdmin(services.pulsar) as admin:
            admin.delete_topic(topics[1], force=True)
        publish(client, topics[0], 3, tag="more")
        if fail:
            with pytest.raises(DataLossError, match=r"gone.*unread message|failOnDataLoss=false"):
                controller.latest_offset(end, None)
        else:
            after = SourceOffset.from_json(controller.latest_offset(end, None))
            keep = after.partitions[TopicPartition(topics[0], -1)]
            assert keep.mark.index == 12  # 10 + 3 messages, all read
            gone = after.partitions.get(TopicPartition(topics[1], -1))
            assert gone is None or gone.mark.index <= 0  # dropped, or restarted on a recreated topic
    finally:
        controller.stop()


def test_cleanup_removes_dead_apps_and_keeps_live_ones(services: Settings, ns: str, client: Any) -> None:
    topic = f"persistent://{ns}/events"
    publish(client, topic, 3)
    tp = TopicPartition(topic, -1)
    view = BrokerView(services.pulsar)
    live = SubscriptionKeeper(services.pulsar, "live", view, heartbeat_interval_s=0)
    try:
        live.attach({tp: Mark(None, -1)})  # a running app: consumer attached
        old = str(int(time.time() * 1000) - 3 * 3600 * 1000)
        with PulsarAdmin(services.pulsar) as admin:
            for app, beat in (("dead", old), ("resting", str(int(time.time() * 1000)))):
                props = {PROP_APP: app, PROP_HEARTBEAT: beat}
                assert admin.create_subscription(topic, f"widehouse-{app}", None, props)
            admin.create_subscription(topic, "someone-else", None)
            # an old heartbeat does not matter while the app is attached
            admin.update_subscription_properties(
                topic, "widehouse-live", {PROP_APP: "live", PROP_HEARTBEAT: old}
            )
            dry = cleanup(view, [ns], ttl_s=3600, dry_run=True)
            assert {v.subscription.app: v.remove for v in dry} == {
                "dead": True,
                "resting": False,
                "live": False,
            }
            assert "widehouse-dead" in admin.subscriptions(topic)
            assert cli_main(["pulsar", "cleanup", "--namespace", ns, "--ttl", "1h"]) == 0
            assert sorted(admin.subscriptions(topic)) == [
                "someone-else",
                "widehouse-live",
                "widehouse-resting",
            ]
            live.close()  # the app stops: with its old heartbeat it is now dead too
            verdicts = cleanup(view, [ns], ttl_s=3600)
            assert [v.subscription.app for v in verdicts if v.remove] == ["live"]
            assert sorted(admin.subscriptions(topic)) == ["someone-else", "widehouse-resting"]
            cleanup(view, [ns], ttl_s=3600, retire=["resting"])
            assert admin.subscriptions(topic) == ["someone-else"]
    finally:
        live.close()
        view.close()


def test_lag_command_shows_backlog_per_app(services: Settings, ns: str, client: Any, capsys: Any) -> None:
    topic = f"persistent://{ns}/lagging"
    publish(client, topic, 7)
    with PulsarAdmin(services.pulsar) as admin:
        props = {PROP_APP: "slow", PROP_HEARTBEAT: str(int(time.time() * 1000))}
        admin.create_subscription(topic, "widehouse-slow", None, props)
    time.sleep(0.5)
    assert cli_main(["pulsar", "lag", "--namespace", ns, "--app", "slow"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "lagging" in line)
    assert row.split()[:5] == ["slow", f"{ns}/lagging", "1", "7", "no"], out


def test_a_reader_without_metadata_reads_the_same_messages_and_leaves_the_metadata_null(
    services: Settings, ns: str, client: Any
) -> None:
    """``ReadConfig.metadata=False`` (the stream's own source): same payloads, ids and publish times."""
    import dataclasses

    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(f"persistent://{ns}/lean", 2)
    sent = publish(client, f"persistent://{ns}/lean", 120, batch=7)
    sent += publish(client, f"persistent://{ns}/plain", 30)
    controller = namespace_controller(services, ns, "lean", messagesPerTask="50")
    try:
        start = controller.initial_offset()
        end = controller.latest_offset(start, None)
        tasks = controller.plan(start, end)
        full_config = controller.options.read_config
        lean_config = dataclasses.replace(full_config, metadata=False)
        assert full_config.metadata
        full = [b for task in tasks for b in read_task(task, full_config)]
        lean = [b for task in tasks for b in read_task(task, lean_config)]
    finally:
        controller.stop()
    import pyarrow as pa

    full_table, lean_table = pa.Table.from_batches(full), pa.Table.from_batches(lean)
    assert lean_table.schema == full_table.schema and lean_table.num_rows == len(sent) == 150
    for column in ("value", "__topic", "__messageId", "__publishTime"):
        assert lean_table.column(column).to_pylist() == full_table.column(column).to_pylist(), column
    for column in ("__key", "__eventTime", "__properties"):
        assert lean_table.column(column).null_count == 150, column
    # the full read's metadata, as publish() set it: key k<i>, property n=i, event time 1000+i ms
    values = [v.decode() for v in full_table.column("value").to_pylist()]
    assert sorted(values) == sorted(sent)
    for value, key, props, event in zip(
        values,
        full_table.column("__key").to_pylist(),
        full_table.column("__properties").to_pylist(),
        full_table.column("__eventTime").cast(pa.int64()).to_pylist(),
        strict=True,
    ):
        i = int(value.rsplit("#", 1)[1])
        assert (key, dict(props), event) == (f"k{i}", {"n": str(i)}, (1000 + i) * 1000)


@pytest.mark.parametrize(("catch_up", "subscribed"), [(200, 4), (5, 6)])
def test_kept_readers_carry_on_across_batches_even_a_batch_behind(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch, catch_up: int, subscribed: int
) -> None:
    """Readers are kept per worker process; Spark gives a task to any idle worker, so a kept reader
    may be one batch behind: within ``_CATCH_UP_MAX`` messages it reads on through the gap (skipped)
    instead of subscribing again. Either way every batch reads exactly its messages."""
    from widehouse.source import reader as reader_module

    topic = f"persistent://{ns}/kept{catch_up}"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 2)
    sent = publish(client, topic, 400, batch=10)
    created: list[str] = []

    class Counting:
        def __init__(self, raw: Any) -> None:
            self.raw = raw

        def create_reader_async(self, name: str, *args: Any) -> None:
            created.append(name)
            self.raw.create_reader_async(name, *args)

    real_client_for = reader_module.client_for
    monkeypatch.setattr(reader_module, "client_for", lambda config: Counting(real_client_for(config)))
    monkeypatch.setattr(reader_module, "_KEPT", type(reader_module._KEPT)())  # this test's readers only
    monkeypatch.setattr(reader_module, "_CATCH_UP_MAX", catch_up)
    options = parse_options(
        {"topics": topic, "startingOffsets": "earliest", "appId": "keep", "durableSubscription": "false"},
        services.pulsar,
    )
    controller = StreamController(options)
    other_worker: dict[Any, Any] = {}
    got: list[list[str]] = []
    try:
        for i, (_end, payloads) in enumerate(run_batches(controller, budget=100)):
            got.append(payloads)
            if i in (0, 1):  # batch 2 runs in "another worker"; batch 3 back in the first one
                mine = dict(reader_module._KEPT)
                reader_module._KEPT.clear()
                reader_module._KEPT.update(other_worker)
                other_worker = mine
    finally:
        controller.stop()
        for kept_reader, _mark, _at in [*reader_module._KEPT.values(), *other_worker.values()]:
            kept_reader.close()
    flat = [p for batch in got for p in batch]
    assert sorted(flat) == sorted(sent) and len(flat) == len(set(flat)) == 400
    assert [len(b) for b in got] == [100, 100, 100, 100]
    # batches 1 and 2 subscribe on both partitions (two "workers"); batch 3 gets batch 1's readers,
    # ~50 messages a partition behind: carried on through the gap, or new ones when that is too far;
    # batch 4 carries on with batch 3's
    assert len(created) == subscribed, created


def test_kept_readers_of_a_deleted_topic_are_closed_at_the_next_sweep(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept reader whose topic is deleted loses its connection and would look the topic up again
    and again until the idle cutoff (an error in the log each time): the janitor's next sweep
    closes it. Connected readers stay until they are idle for ``_KEPT_IDLE_S``."""
    from widehouse.source import reader as reader_module

    monkeypatch.setattr(reader_module, "_KEPT", type(reader_module._KEPT)())  # this test's readers only
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(f"persistent://{ns}/gone", 2)
        sent = publish(client, f"persistent://{ns}/gone", 40)
        sent += publish(client, f"persistent://{ns}/stays", 10)
        admin.set_auto_topic_creation(ns, False)  # the readers' reconnects must not bring it back
        assert sorted(read_namespace_once(services, ns, "sweep")) == sorted(sent)
        kept = {key[2]: entry[0] for key, entry in reader_module._KEPT.items()}
        assert sorted(kept) == [
            f"persistent://{ns}/gone-partition-0",
            f"persistent://{ns}/gone-partition-1",
            f"persistent://{ns}/stays",
        ]
        assert reader_module._sweep(time.monotonic()) == 0  # connected and just used
        admin.delete_topic(f"persistent://{ns}/gone")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
        kept[f"persistent://{ns}/gone-partition-{i}"].is_connected() for i in (0, 1)
    ):
        time.sleep(0.2)
    assert reader_module._sweep(time.monotonic()) == 2
    assert [key[2] for key in reader_module._KEPT] == [f"persistent://{ns}/stays"]
    assert reader_module._sweep(time.monotonic() + reader_module._KEPT_IDLE_S + 1) == 1  # idle
    assert not reader_module._KEPT


def test_close_kept_closes_every_kept_reader_of_the_process(
    services: Settings, ns: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a process calls before deleting the topics it read (a benchmark's tenants): its kept
    readers are closed at once, not at the janitor's next sweep."""
    from widehouse.source import reader as reader_module

    monkeypatch.setattr(reader_module, "_KEPT", type(reader_module._KEPT)())  # this test's readers only
    sent = publish(client, f"persistent://{ns}/a", 20) + publish(client, f"persistent://{ns}/b", 20)
    assert sorted(read_namespace_once(services, ns, "closekept")) == sorted(sent)
    readers = [entry[0] for entry in reader_module._KEPT.values()]
    assert len(readers) == 2 and all(r.is_connected() for r in readers)
    assert reader_module.close_kept() == 2
    assert not reader_module._KEPT
    assert not any(r.is_connected() for r in readers)
    assert reader_module.close_kept() == 0

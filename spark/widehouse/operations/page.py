"""The overview as one server-rendered HTML page: tables, strips and small inline SVG charts.

No JavaScript, no stylesheet or font from elsewhere (the page must render with no network), every
value escaped. A strip cell links to the Airflow run that published its period (:func:`cell_link`):
the run the ledger row names (``airflow_run``: a re-finalize links to the ``widehouse_refinalize``
run that made it), straight to Airflow's run page; for a ledger row without one (written before the
column existed, or by a job no Airflow task ran) and for unpublished periods, through the view's
``run`` endpoint, which finds the run of the publishing DAG (``widehouse_hourly`` for hours,
``widehouse_daily`` for days) logical-dated at the period. The cell's title shows both run ids.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

from widehouse.contracts.identity import parse_airflow_run
from widehouse.errors import ConfigError
from widehouse.operations.health import (
    ACCEPTED,
    DUE,
    FINAL,
    FORCED,
    LIVE,
    MISMATCH,
    REFINALIZED,
    WAITING,
    Cell,
    GroupHealth,
    Rejections,
    Strip,
)
from widehouse.operations.overview import Overview

COLOURS: dict[str, str] = {
    LIVE: "#9ecae1",
    WAITING: "#bdbdbd",
    DUE: "#fc8d59",
    FINAL: "#31a354",
    FORCED: "#a1d99b",
    ACCEPTED: "#ffeda0",
    REFINALIZED: "#756bb1",
    MISMATCH: "#de2d26",
}
HOURLY_DAG = "widehouse_hourly"
DAILY_DAG = "widehouse_daily"

_STYLE = """
body{font-family:sans-serif;margin:16px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;font-size:13px}
td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}
.ok{color:#31a354;font-weight:bold}.bad{color:#de2d26;font-weight:bold}.strip a{text-decoration:none}
.legend span{display:inline-block;padding:1px 6px;margin-right:4px;font-size:12px}
pre{background:#f6f6f6;padding:4px;max-width:600px;white-space:pre-wrap;word-break:break-all;font-size:11px}
.problem{color:#a50}
"""


def render(view: Overview) -> str:
    """The whole page (served at the view's root: its links are relative to it)."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Widehouse</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Widehouse: {escape(view.app)} at {escape(_t(view.now))}</h1>",
        *(f"<p class='problem'>{escape(p)}</p>" for p in view.problems),
        _groups(view.groups),
        _strips(view.strips),
        _rejections(view.rejections),
        _repairs(view),
        _plan(view),
        "</body></html>",
    ]
    return "\n".join(parts)


def _groups(groups: Sequence[GroupHealth]) -> str:
    rows = [
        "<h2>Slot groups</h2><table><tr><th>group</th><th>state</th><th>last commit</th>"
        "<th>batch</th><th>watermark</th><th>restarts (24 h)</th><th>events/s</th><th>freshness (s)</th>"
        "<th>lag per topic</th></tr>"
    ]
    for g in groups:
        state = f"<span class='{'ok' if g.alive else 'bad'}'>{escape(g.state)}</span>"
        if g.last_failure:
            state += f"<br><small title='{escape(g.last_failure)}'>last failure</small>"
        lag = ", ".join(f"{escape(t)}: {n:,}" for t, n in g.lag) or "-"
        rows.append(
            f"<tr><td>{escape(g.name)}</td><td>{state}</td><td>{escape(_t(g.last_commit))}</td>"
            f"<td>{g.last_batch if g.last_batch is not None else '-'}</td><td>{escape(_t(g.watermark))}</td>"
            f"<td title='{g.failures} consecutive failure(s) now'>{g.restarts}</td>"
            f"<td>{spark_line([p.events_per_s for p in g.points])}</td>"
            f"<td>{spark_line([p.freshness_s for p in g.points])}</td><td>{lag}</td></tr>"
        )
    if not groups:
        rows.append("<tr><td colspan='9'>no group committed a batch in the window</td></tr>")
    return "".join(rows) + "</table>"


def _strips(strips: Sequence[Strip]) -> str:
    legend = "".join(f"<span style='background:{c}'>{escape(s)}</span>" for s, c in COLOURS.items())
    out = [f"<h2>Wide tables</h2><p class='legend'>{legend}</p><table>"]
    for s in strips:
        hours = _cells(s.hours, HOURLY_DAG) if s.hours else ""
        days = _cells(s.days, HOURLY_DAG if s.grain == "hour" else DAILY_DAG)
        out.append(
            f"<tr><td>{escape(s.table)}<br><small>{escape(s.grain)}</small></td>"
            f"<td class='strip'>{('last 48 h ' + hours + '<br>') if hours else ''}"
            f"last 14 days {days}</td></tr>"
        )
    return "".join(out) + "</table>"


def _cells(cells: Sequence[Cell], dag: str) -> str:
    width = 10 if len(cells) > 20 else 24
    boxes = []
    for i, c in enumerate(cells):
        title = f"{_t(c.period)} {c.state}"
        if c.publishes:
            title += f", published {c.publishes}x, {c.rows} rows, run {c.run_id}"
        if c.airflow_run:
            title += f", Airflow run {c.airflow_run}"
        if c.final_hours:
            title += f", {c.final_hours}/24 hours published"
        boxes.append(
            f"<a href='{escape(cell_link(dag, c))}'>"
            f"<rect x='{i * (width + 1)}' y='0' width='{width}' height='14' "
            f"fill='{COLOURS.get(c.state, '#ccc')}'><title>{escape(title)}</title></rect></a>"
        )
    total = len(cells) * (width + 1)
    svg = f"<svg xmlns='http://www.w3.org/2000/svg' width='{total}' height='14' role='img'>"
    return svg + "".join(boxes) + "</svg>"


def _rejections(rej: Rejections) -> str:
    reasons = ", ".join(f"{escape(r)} ({n:,})" for r, n in rej.reasons) or "none"
    out = [
        f"<h2>Quarantine and late data (48 h)</h2><p>Top reasons: {reasons}</p>"
        "<table><tr><th>topic</th><th>in</th><th>quarantined</th><th>late</th><th>bad rate/h</th>"
        "<th>late rate/h</th><th>top reasons</th><th>newest sample</th></tr>"
    ]
    for t in rej.topics:
        bad = [100 * p.bad / p.rows_in if p.rows_in else 0.0 for p in t.points]
        late = [100 * p.late / p.rows_in if p.rows_in else 0.0 for p in t.points]
        sample = ""
        if t.sample:
            sample = (
                f"<small>{escape(t.sample['reason'])}: {escape(t.sample['detail'])}</small>"
                f"<pre>{escape(t.sample['payload'])}</pre>"
            )
        out.append(
            f"<tr><td>{escape(t.topic)}</td><td>{t.rows_in:,}</td><td>{t.bad:,} ({t.bad_rate:.2%})</td>"
            f"<td>{t.late:,} ({t.late_rate:.2%})</td><td>{spark_line(bad, unit='%')}</td>"
            f"<td>{spark_line(late, unit='%')}</td>"
            f"<td>{', '.join(f'{escape(r)} ({n})' for r, n in t.reasons)}</td><td>{sample}</td></tr>"
        )
    if not rej.topics:
        out.append("<tr><td colspan='8'>nothing quarantined or late in the window</td></tr>")
    return "".join(out) + "</table>"


def _repairs(view: Overview) -> str:
    out = [
        "<h2>Repairs of quarantined events (14 days)</h2><table><tr><th>table</th><th>repaired</th>"
        "<th>still quarantined</th><th>chunks to finish</th><th>newest</th></tr>"
    ]
    out += [
        f"<tr><td>{escape(r.table)}</td><td>{r.repaired:,}</td><td>{r.still_invalid:,}</td>"
        f"<td>{r.unfinished_chunks}</td><td>{escape(_t(r.newest))}</td></tr>"
        for r in view.repairs
    ]
    if not view.repairs:
        out.append("<tr><td colspan='5'>no repair in the window (<code>widehouse repair</code>)</td></tr>")
    return "".join(out) + "</table>"


def _plan(view: Overview) -> str:
    if view.plan is None:
        return "<h2>Plan</h2><p>no plan file</p>"
    p = view.plan
    rows = [
        f"<h2>Plan</h2><p>{len(p.groups)} groups, {p.topics:,} topics, {p.cores} cores; isolated topics: "
        f"{escape(', '.join(p.isolated_topics)) or 'none'}</p>"
        "<table><tr><th>group</th><th>topics</th><th>load</th><th>cores</th><th>fill</th><th></th></tr>"
    ]
    for g in p.groups:
        colour = "#de2d26" if g.fill > 1 else "#3182bd"
        bar = (
            "<svg width='100' height='10'><rect width='100' height='10' fill='#eee'/>"
            f"<rect width='{min(100, round(g.fill * 100))}' height='10' fill='{colour}'/></svg>"
        )
        rows.append(
            f"<tr><td>{escape(g.name)}</td><td>{g.topics}</td><td>{g.load:,.0f}</td><td>{g.cores}</td>"
            f"<td>{g.fill:.0%} {bar}</td><td>{'isolated' if g.isolated else ''}</td></tr>"
        )
    return "".join(rows) + "</table>"


def run_link(dag: str, period: dt.datetime) -> str:
    """The view's relative link to the Airflow run of ``dag`` that publishes ``period``."""
    return f"run?dag={quote(dag)}&period={quote(period.isoformat())}"


def airflow_run_link(airflow_run: str) -> str | None:
    """The relative link (from the view's root, ``/widehouse/``) to Airflow 3's page of the run the
    ledger names (``<dag id>/<run id>``): ``../dags/<dag id>/runs/<run id>``; None if it is not one."""
    try:
        dag_id, run_id = parse_airflow_run(airflow_run)
    except ConfigError:  # not a reference the tasks write (hand-made row): the fallback link
        return None
    return f"../dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def cell_link(dag: str, cell: Cell) -> str:
    """Where a strip cell links: the Airflow run its ledger row names, else (no such run recorded)
    the run of ``dag`` logical-dated at the cell's period, found by the view's ``run`` endpoint."""
    return (airflow_run_link(cell.airflow_run) if cell.airflow_run else None) or run_link(dag, cell.period)


def spark_line(values: Sequence[float], width: int = 120, height: int = 24, unit: str = "") -> str:
    """A small inline SVG polyline of ``values`` (oldest first), scaled to its own maximum, and the
    newest value."""
    if not values:
        return "-"
    top = max(values) or 1.0
    step = width / max(1, len(values) - 1)
    points = " ".join(
        f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(values)
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img'>"
        f"<title>max {max(values):,.2f}{unit}</title>"
        f"<polyline fill='none' stroke='#3182bd' stroke-width='1.5' points='{points}'/></svg>"
        f" <small>{values[-1]:,.1f}{unit}</small>"
    )


def _t(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") + "Z" if value is not None else "-"


__all__ = [
    "COLOURS",
    "DAILY_DAG",
    "HOURLY_DAG",
    "airflow_run_link",
    "cell_link",
    "render",
    "run_link",
    "spark_line",
]

"""A self-contained HTML report: headline numbers, tables and matplotlib charts embedded as PNG.

Built on the driver from small, already aggregated data (a few hundred rows at most); matplotlib's
object API with the Agg canvas, so no display and no global pyplot state is needed.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } .sub { color: #666; margin-top: 0; }
.headline { display: flex; flex-wrap: wrap; gap: 1em; margin: 1.5em 0; }
.number { border: 1px solid #ddd; border-radius: 6px; padding: 0.7em 1em; min-width: 10em; }
.number .value { font-size: 1.6em; font-weight: 600; } .number .label { color: #555; font-size: 0.9em; }
.number.warn { border-color: #d62728; } .number.warn .value { color: #d62728; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 0.3em 0.7em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; } .note { color: #666; font-size: 0.9em; }
"""


@dataclass
class Report:
    """Sections in the order they are added."""

    title: str
    subtitle: str = ""
    _parts: list[str] = field(default_factory=list)

    def headline(self, numbers: Sequence[tuple[str, object] | tuple[str, object, bool]]) -> None:
        """Big numbers: ``(label, value)`` or ``(label, value, warn)``."""
        cells = []
        for item in numbers:
            label, value = item[0], item[1]
            warn = len(item) > 2 and bool(item[2])
            cells.append(
                f'<div class="number{" warn" if warn else ""}"><div class="value">{html.escape(fmt(value))}</div>'
                f'<div class="label">{html.escape(label)}</div></div>'
            )
        self._parts.append(f'<div class="headline">{"".join(cells)}</div>')

    def heading(self, text: str) -> None:
        """A section heading."""
        self._parts.append(f"<h2>{html.escape(text)}</h2>")

    def paragraph(self, text: str, note: bool = False) -> None:
        """A paragraph (escaped)."""
        self._parts.append(f"<p{' class=note' if note else ''}>{html.escape(text)}</p>")

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[object]], caption: str = "") -> None:
        """A table; numbers right-aligned."""
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = []
        for row in rows:
            cells = "".join(
                f'<td class="num">{html.escape(fmt(v))}</td>'
                if isinstance(v, int | float)
                else f"<td>{html.escape(fmt(v))}</td>"
                for v in row
            )
            body.append(f"<tr>{cells}</tr>")
        if not rows:
            body.append(f'<tr><td colspan="{len(columns)}" class="note">none</td></tr>')
        cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
        self._parts.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")

    def figure(self, figure: Figure, alt: str) -> None:
        """A chart, embedded as a PNG data URI."""
        self._parts.append(f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{png_base64(figure)}"></p>')

    def html(self) -> str:
        """The whole document."""
        generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return (
            "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{html.escape(self.title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1><p class=sub>{html.escape(self.subtitle)} · generated {generated}</p>"
            + "\n".join(self._parts)
            + "</body></html>\n"
        )


def fmt(value: object) -> str:
    """Numbers readable: floats with 3 significant decimals, ints with thousands separators."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, datetime):  # snapshots can be milliseconds apart: show the milliseconds
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(value)


def png_base64(figure: Figure) -> str:
    """A figure as base64 PNG."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    ylabel: str,
    colors: Sequence[str] | None = None,
    legend: dict[str, str] | None = None,
    hline: tuple[float, str] | None = None,
) -> Figure:
    """Vertical bars, one per label (rotated labels when many)."""
    figure = Figure(figsize=(10, 4.2))
    ax = figure.add_subplot()
    positions = list(range(len(values)))
    ax.bar(positions, values, color=list(colors) if colors else PALETTE[0])
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, rotation=60 if len(labels) > 8 else 0, ha="right" if len(labels) > 8 else "center")
    ax.tick_params(axis="x", labelsize=8 if len(labels) > 20 else 9)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if hline is not None:
        ax.axhline(hline[0], color="#444", linestyle="--", linewidth=1, label=hline[1])
    if legend:
        from matplotlib.patches import Patch

        handles = [Patch(color=color, label=name) for name, color in legend.items()]
        if hline is not None:
            handles.append(ax.get_legend_handles_labels()[0][0])  # type: ignore[arg-type]
        ax.legend(handles=handles, fontsize=8)
    elif hline is not None:
        ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return figure


def has_trend(series: Mapping[str, tuple[Sequence[datetime], Sequence[float]]]) -> bool:
    """True when the series span at least two distinct times: a line chart over fewer says nothing
    (callers write a sentence instead)."""
    return len({t for times, _ in series.values() for t in times}) >= 2


def time_label_format(span_seconds: float) -> str:
    """The ``strftime`` format of time-axis labels for a time span: the finest unit that changes
    between ticks, always with hours and minutes, so no label reads like ``05:30.000000``."""
    if span_seconds < 60:
        return "%H:%M:%S.%f"  # cut to milliseconds by the formatter
    if span_seconds < 3600:
        return "%H:%M:%S"
    if span_seconds < 2 * 86_400:
        return "%H:%M"
    return "%m-%d %H:%M"


def line_chart(
    series: Mapping[str, tuple[Sequence[datetime], Sequence[float]]], *, title: str, ylabel: str, steps: bool = False
) -> Figure:
    """One line per series over time (UTC): tick labels in :func:`time_label_format`, the date under
    the axis when every point is on one day. Check :func:`has_trend` first."""
    figure = Figure(figsize=(10, 3.8))
    ax = figure.add_subplot()
    everything = [t for times, _ in series.values() for t in times]
    for i, (name, (times, ys)) in enumerate(sorted(series.items())):
        xs = [t.replace(tzinfo=timezone.utc).timestamp() for t in times]  # seconds since the epoch, UTC
        style = "-o" if len(xs) <= 60 else "-"
        if steps:
            ax.step(xs, ys, where="post", label=name, color=PALETTE[i % len(PALETTE)])
        else:
            ax.plot(xs, ys, style, label=name, color=PALETTE[i % len(PALETTE)], markersize=3)
    first, last = (min(everything), max(everything)) if everything else (datetime.now(), datetime.now())
    label_format = time_label_format((last - first).total_seconds())

    def label(x: float, _position: object) -> str:
        text = datetime.fromtimestamp(x, timezone.utc).strftime(label_format)
        return text[:-3] if label_format.endswith("%f") else text

    ax.xaxis.set_major_locator(MaxNLocator(nbins=8))
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    one_day = first.date() == last.date()
    ax.set_xlabel(f"time (UTC) on {first:%Y-%m-%d}" if one_day else f"time (UTC), {first:%Y-%m-%d} to {last:%Y-%m-%d}")
    if len(label_format) > 9:  # long labels: slanted, so they never overlap
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    values = [y for _, ys in series.values() for y in ys]
    if values and min(values) >= 0:  # counts and ratios: the axis starts at 0, never below
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] if max(values) > 0 else 1)
    if series:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    figure.tight_layout()
    return figure

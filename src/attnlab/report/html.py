"""One self-contained HTML page from study sections: figures embedded, tables sortable, findings first (``render``);
and the parts of a page that shows what commands wrote, panel by panel, figures before tables and tables collapsed,
as the card's page does (``panel_html``, ``page_html``).

Rendering only: it reads the files a ``Section`` points at (CSV tables, PNG figures) and never computes
a number. The page needs no network and no other file: images are inline base64, the sort script and
the style sheet are in the page.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from attnlab.findings.finding import VERDICTS, Finding
from attnlab.report.sections import Section

# Marks a page as attnlab's, so a rerun may replace it while a user's own file of the same name is refused.
GENERATOR = '<meta name="generator" content="attnlab">'


def is_ours(path: Path) -> bool:
    """Whether the file at ``path`` is a page attnlab rendered (its head carries ``GENERATOR``)."""
    try:
        with open(path, "rb") as page:
            return GENERATOR.encode() in page.read(1024)
    except OSError:
        return False


MAX_ROWS = 200  # longer tables are cut in the page (the CSV beside it holds every row)

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #1d1d1f; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { border-top: 2px solid #ddd; padding-top: 1em; margin-top: 2em; }
.meta, .source { color: #666; font-size: 0.9em; }
code { background: #f3f3f3; padding: 0.1em 0.3em; border-radius: 3px; font-size: 0.9em; }
.finding { border-left: 5px solid #999; padding: 0.4em 0.8em; margin: 0.6em 0; background: #fafafa; }
.finding.reproduced { border-color: #2e8540; } .finding.not-reproduced { border-color: #c0392b; }
.finding.not-checked { border-color: #e0a800; } .finding.underpowered { border-color: #6c757d; }
.discipline { font-size: 0.88em; color: #333; margin: 0.3em 0 0; padding-left: 1.2em; }
.counts span { display: inline-block; margin-right: 1.2em; }
.finding.check-passed { border-color: #2e8540; border-left-style: dashed; }
.finding.check-failed { border-color: #c0392b; border-left-style: dashed; }
td.check-passed, td.check-failed { font-style: italic; }
.warning { border: 2px solid #c0392b; background: #fdecea; padding: 0.5em 0.8em; margin: 0.6em 0; font-weight: 600; }
.verdict { font-weight: 600; text-transform: uppercase; font-size: 0.8em; letter-spacing: 0.04em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; cursor: pointer; user-select: none; }
td.text, th.text { text-align: left; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #333; } .cmd { color: #666; font-size: 0.85em; }
nav ul { columns: 2; } .scroll { overflow-x: auto; }
"""

_SORT = """
document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
    var rows = Array.from(body.rows), up = th.dataset.dir !== "up";
    table.querySelectorAll("th").forEach(function (h) { h.dataset.dir = ""; });
    th.dataset.dir = up ? "up" : "down";
    var index = Array.from(th.parentNode.children).indexOf(th);
    rows.sort(function (a, b) {
      var x = a.cells[index].textContent, y = b.cells[index].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return up ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _esc(text: str) -> str:
    return html.escape(str(text))


def _cell(value) -> str:
    if isinstance(value, float):
        return "-" if pd.isna(value) else f"{value:.4g}"
    return _esc(value)


def table_html(csv: Path) -> str:
    """A CSV file as a sortable HTML table (numbers right-aligned, text left)."""
    return _table(pd.read_csv(csv), csv.name, MAX_ROWS)


def _table(frame: pd.DataFrame, name: str, rows: int, page: int | None = None, prose: int | None = None) -> str:
    """``frame`` (read from the file ``name``) as a sortable table of its first ``rows`` rows; ``page``: shown that
    many rows at a time (``PAGER`` adds the buttons) where it has more; ``prose``: a text column holding a value
    longer than this many characters is marked ``prose`` (the style keeps it from being squeezed to a word a line)."""
    shown = frame.head(rows)
    text = [not pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t) for t in frame.dtypes]
    long = [prose is not None and shown[c].astype(str).str.len().max() > prose for c in frame.columns]
    kinds = ["num" if not t else "text prose" if p else "text" for t, p in zip(text, long)]
    head = "".join(f'<th class="{k}">{_esc(c)}</th>' for c, k in zip(frame.columns, kinds))
    body = "".join(
        "<tr>" + "".join(f'<td class="{k}">{_cell(v)}</td>' for v, k in zip(row, kinds)) + "</tr>"
        for row in shown.itertuples(index=False)
    )
    cut = (
        f'<p class="meta">first {rows} of {len(frame)} rows; all of them are in <code>{_esc(name)}</code></p>'
        if len(frame) > rows
        else ""
    )
    paged = f' data-page="{page}"' if page is not None and len(shown) > page else ""
    return (
        f'<div class="scroll"><table class="sortable"{paged}><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>{cut}"
    )


def _image(png: Path) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return f'<img alt="{_esc(png.stem)}" src="data:image/png;base64,{data}">'


def finding_html(f: Finding) -> str:
    """One finding: its label and claim, the numbers that decide it, and the discipline behind the label (the rule
    fixed before the numbers were read, the null control's outcome under it, the design's MDE, the reason)."""
    kind = f.verdict.replace(" ", "-")
    lines = []
    if f.rule:
        lines.append(f"<li><strong>rule</strong>: {_esc(f.rule)}</li>")
    if f.null is not None:
        lines.append(
            f"<li><strong>null control</strong>: {_esc(f.null.control)}: <strong>{_esc(f.null.result)}</strong>"
            f"{': ' + _esc(f.null.outcome) if f.null.outcome else ''}</li>"
        )
    if f.mde is not None:
        lines.append(f"<li><strong>MDE</strong>: {_esc(f.mde.words())}</li>")
    if f.reason:
        lines.append(f"<li><strong>why {_esc(f.verdict)}</strong>: {_esc(f.reason)}</li>")
    listed = f'<ul class="discipline">{"".join(lines)}</ul>' if lines else ""
    return (
        f'<div class="finding {kind}"><span class="verdict">{_esc(f.verdict)}</span>: '
        f"{_esc(f.claim)}<br>{_esc(f.evidence)}{listed}</div>"
    )


def label_counts(findings: Sequence[Finding]) -> dict[str, int]:
    """How many findings carry each label, in the order of ``VERDICTS``, labels with none left out."""
    found = [f.verdict for f in findings]
    return {v: found.count(v) for v in VERDICTS if v in found}


def section_html(
    section: Section,
    folder: Path,
    anchor: str,
    *,
    recomputed: bool = True,
    source: Path | None = None,
    gathered: bool = False,
) -> str:
    """One section; ``recomputed``: its findings, figures and tables are computed from the folder's files by its
    study's summary or ``attnlab report`` (a study's, a command's), else the page only shows what its command wrote
    (a card's). ``source``: the folder ``attnlab report`` was given, of which ``folder`` is its copy; ``gathered``:
    a comparison ``attnlab report`` made across the folders of its page. A table marked ``found`` is said to be
    shown as its command wrote it."""
    found = any(t.found for t in section.tables)
    if not recomputed:
        how = ""
    elif gathered:
        how = "; its tables are gathered by <code>attnlab report</code> from the folders it recomputed on this page"
    elif source is not None:
        how = (
            "; the findings, figures and tables below are recomputed by <code>attnlab report</code> from a copy of "
            f"the folder's files, in <code>{_esc(folder)}</code>"
        )
    else:
        how = (
            "; the findings, figures and tables below are computed from the folder's files "
            f"(<code>attnlab report {_esc(folder)} --out DIR</code> recomputes them)"
        )
    if recomputed and found:
        how += (
            ", except the tables marked <em>shown as found</em>: those are the files the command wrote, shown as "
            "they are (and so is anything drawn from them)"
        )
    parts = [
        f'<h2 id="{anchor}">{_esc(section.title)}</h2>',
        f'<p class="source">source <code>{_esc(section.source)}</code> &middot; folder '
        f"<code>{_esc(source or folder)}</code></p>",
        f"<p>{_esc(section.question)}</p>",
        f'<p class="cmd">made by <code>{_esc(section.command)}</code>{how}</p>',
    ]
    for warning in section.warnings:
        parts.append(f'<div class="warning">warning: {_esc(warning)}</div>')
    claims = [f for f in section.findings if not f.is_check]
    checks = [f for f in section.findings if f.is_check]
    parts += [finding_html(f) for f in claims]
    if checks:
        parts.append("<h3>Software checks</h3>")
        parts.append('<p class="meta">identities attnlab must satisfy, not findings of the papers</p>')
        parts += [finding_html(f) for f in checks]
    for note in section.notes:
        parts.append(f'<p class="meta">{_esc(note)}</p>')
    for t in section.tables:
        csv = folder / f"{t.stem}.csv"
        parts.append(f"<h3>{_esc(t.caption)}</h3>")
        parts.append(table_html(csv))
        shown = (
            f"<strong>shown as found</strong>: <code>{_esc(csv.name)}</code> as its command wrote it, not recomputed; "
            if t.found
            else ""
        )
        parts.append(f'<p class="meta">{shown}file: <code>{_esc(csv)}</code></p>')
    for fig in section.figures:
        png = folder / f"{fig.stem}.png"
        parts.append(
            f"<figure>{_image(png)}<figcaption>{_esc(fig.caption)}"
            f'<br><span class="cmd">{_esc(png)} (and .svg), made by <code>{_esc(section.command)}</code>'
            "</span></figcaption></figure>"
        )
    return "\n".join(parts)


def _verdict_cell(finding: Finding) -> str:
    """The verdict table's cell; a check's is styled apart, so an identity attnlab checks does not read as
    a paper's finding."""
    kind = f" {finding.verdict.replace(' ', '-')}" if finding.is_check else ""
    return f'<td class="text{kind}">{_esc(finding.verdict)}</td>'


def _summary_table(sections, anchors, pick, head: str) -> str:
    """The page's table of the findings ``pick`` selects, each linked to its section, with its null's outcome and
    MDE."""
    rows = "".join(
        f'<tr><td class="text"><a href="#{a}">{_esc(s.study)}</a></td>{_verdict_cell(f)}'
        f'<td class="text">{_esc(f.claim)}</td>'
        f'<td class="text">{_esc(f.null.result if f.null is not None else "")}</td>'
        f'<td class="text">{_esc(f.mde.words() if f.mde is not None else "")}</td></tr>'
        for (s, _), a in zip(sections, anchors)
        for f in s.findings
        if pick(f)
    )
    return (
        f'<h3>{head}</h3><table class="sortable"><thead><tr><th class="text">study</th>'
        '<th class="text">verdict</th><th class="text">finding checked</th><th class="text">null control</th>'
        f'<th class="text">MDE</th></tr></thead><tbody>{rows}</tbody></table>'
        if rows
        else ""
    )


CALIBRATION_NOTE = (
    "What a label means: each rule's false-positive rate (at most 5%), its power at the paper's effect (at least "
    "80%, else the finding reads underpowered) and its intervals' coverage are measured by simulation at each "
    "budget's sample sizes; <code>attnlab verdicts --calibrate</code> writes the table, and the documentation's "
    "page &ldquo;What a label means&rdquo; holds the recorded one."
)


def render(
    sections: Sequence[tuple[Section, Path]],
    title: str = "attnlab report",
    *,
    recomputed: bool = True,
    sources: Mapping[Path, Path] | None = None,
) -> str:
    """The whole page: a summary of every finding, then one part per section (``recomputed``: as ``section_html``;
    ``sources``: the folder each copy ``attnlab report`` recomputed a section in was made from, by copy)."""
    sources = sources or {}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    # A study name is the user's text: only letters, digits, - and _ of it reach an id or href.
    anchors = [f"s{i}-{re.sub(r'[^A-Za-z0-9_-]', '-', s.study)}" for i, (s, _) in enumerate(sections)]
    toc = "".join(f'<li><a href="#{a}">{_esc(s.title)}</a></li>' for (s, _), a in zip(sections, anchors))
    every = [f for s, _ in sections for f in s.findings]
    counts = "".join(f"<span><strong>{n}</strong> {_esc(v)}</span>" for v, n in label_counts(every).items())
    summary = (
        (f'<p class="counts">{counts}</p><p class="meta">{CALIBRATION_NOTE}</p>' if counts else "")
        + _summary_table(sections, anchors, lambda f: not f.is_check, "Findings")
        + _summary_table(sections, anchors, lambda f: f.is_check, "Software checks")
    )
    body = "\n".join(
        section_html(
            s,
            folder,
            a,
            recomputed=recomputed,
            source=sources.get(folder),
            gathered=bool(sources) and folder not in sources,
        )
        for (s, folder), a in zip(sections, anchors)
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{GENERATOR}<title>{_esc(title)}</title>'
        f"<style>{_STYLE}</style></head><body>\n<h1>{_esc(title)}</h1>"
        f'<p class="meta">written {stamp}</p><nav><ul>{toc}</ul></nav>{summary}\n{body}\n'
        f"<script>{_SORT}</script></body></html>\n"
    )


# A page that shows what commands wrote (the card's, ``cards.page``): each panel's figures before its words, its
# tables collapsed behind their captions, and nothing wider than a phone's screen.

PAGE_ROWS = 30  # rows a panel's table shows at a time
PAGED_MAX = 10_000  # rows a panel's table holds (every head of a 100-layer x 64-head model); its CSV holds all
PROSE = 40  # characters past which a panel's text column is given room as prose

PANEL_STYLE = """
body { margin: 0.8em auto; overflow-wrap: break-word; }
h1 { margin: 0; overflow-wrap: anywhere; } h2 { margin-top: 1.6em; } code { overflow-wrap: anywhere; }
img { max-width: 100%; height: auto; }
.badge { display: inline-block; padding: 0 0.5em; border-radius: 0.8em; font-size: 0.8em; font-weight: 600;
         color: #fff; background: #6c757d; white-space: nowrap; }
.badge.reproduced, .badge.best, .badge.check-passed { background: #2e8540; }
.badge.not-reproduced, .badge.none-preserves, .badge.check-failed { background: #c0392b; }
.badge.not-checked { background: #e0a800; color: #1d1d1f; } .badge.tied { background: #3b6ea5; }
.badge.not-read { background: #ddd; color: #333; }
ol.answers { list-style: none; padding: 0; margin: 0.5em 0; }
ol.answers li { margin: 0 0 0.4em; padding: 0.25em 0.6em; border-left: 4px solid #ccc; background: #fafafa; }
ol.answers a { font-weight: 600; color: inherit; } ol.answers p { margin: 0.1em 0 0; font-size: 0.9em; }
.lead { margin: 0.4em 0; } .small { font-size: 0.85em; color: #555; } .small p { margin: 0.3em 0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
pre.cmd { overflow-x: auto; white-space: pre; background: #f3f3f3; padding: 0.4em 0.6em; margin: 0.2em 0 0.5em; }
pre.cmd code { font-size: 1em; padding: 0; background: none; overflow-wrap: normal; }
details { margin: 0.3em 0; } summary { cursor: pointer; font-size: 0.9em; }
ul.findings { padding-left: 1.2em; font-size: 0.9em; } nav.toc { font-size: 0.9em; }
td.prose { min-width: 16em; text-align: left; }
.pager { font-size: 0.85em; margin: -1em 0 1em; } .pager button { margin: 0 0.5em; }
@media (max-width: 600px) { body { padding: 0 0.6em; } h1 { font-size: 1.6em; } }
"""

# Shows a table with data-page="N" N rows at a time behind prev/next buttons; a sort (``_SORT``, whose listeners
# run first) starts it again at its first rows.
PAGER = """
document.querySelectorAll("table[data-page]").forEach(function (table) {
  var size = Number(table.dataset.page), start = 0, rows = table.tBodies[0].rows;
  var bar = document.createElement("div"), where = document.createElement("span");
  function button(text, step) {
    var b = document.createElement("button");
    b.type = "button"; b.textContent = text;
    b.addEventListener("click", function () { start = Math.max(0, start + step * size); show(); });
    return b;
  }
  var prev = button("prev", -1), next = button("next", 1);
  function show() {
    for (var i = 0; i < rows.length; i++) rows[i].hidden = i < start || i >= start + size;
    where.textContent = "rows " + (start + 1) + "-" + Math.min(start + size, rows.length) + " of " + rows.length;
    prev.disabled = start === 0; next.disabled = start + size >= rows.length;
  }
  table.querySelectorAll("th").forEach(function (th) {
    th.addEventListener("click", function () { start = 0; show(); });
  });
  bar.className = "pager"; bar.append(prev, where, next);
  table.parentNode.after(bar);
  show();
});
"""


def badge_html(label: str) -> str:
    """``label`` as a coloured badge: a finding's verdict, or a reading's word (best, tied, none preserves, not
    read); its class is the label, spaces as hyphens."""
    return f'<span class="badge {_esc(label.replace(" ", "-"))}">{_esc(label)}</span>'


def href(path: Path, here: Path) -> str:
    """The link to ``path`` from a page in the folder ``here``: relative, so the page and its files move together."""
    return _esc(quote(os.path.relpath(path, here).replace(os.sep, "/")))


def figure_html(png: Path, caption: str, here: Path) -> str:
    """A figure embedded from its PNG, its caption, and links to its PNG and SVG files (for a page in ``here``)."""
    files = " &middot; ".join(
        f'<a href="{href(f, here)}">{f.suffix[1:].upper()}</a>' for f in (png, png.with_suffix(".svg")) if f.exists()
    )
    return f"<figure>{_image(png)}<figcaption>{_esc(caption)} &middot; {files}</figcaption></figure>"


def collapsed_table_html(csv: Path, caption: str, here: Path) -> str:
    """A CSV file behind its caption: a ``<details>`` whose summary says how many rows it has and links the file (for
    a page in ``here``); the table sortable and shown ``PAGE_ROWS`` rows at a time."""
    try:
        frame = pd.read_csv(csv)
    except pd.errors.EmptyDataError:  # a panel that read nothing writes a file without columns
        frame = pd.DataFrame()
    rows = f"{len(frame)} row{'' if len(frame) == 1 else 's'}"
    table = _table(frame, csv.name, PAGED_MAX, PAGE_ROWS, PROSE) if len(frame) else ""
    return (
        f'<details class="table"><summary>table: {_esc(caption)} ({rows}) &middot; '
        f'<a href="{href(csv, here)}">CSV</a></summary>{table}</details>'
    )


def panel_html(section: Section, folder: Path, anchor: str, here: Path, figures: Sequence[str] | None = None) -> str:
    """One section as a panel of a page that shows what its command wrote into ``folder``: heading, figures, its
    question as the reading, findings, then source, command (one per line, scrolling rather than wrapping) and
    notes in small print, then its tables collapsed. ``here``: the page's folder; ``figures``: markup in place of
    the section's figures (else each PNG embedded)."""
    if figures is None:
        figures = [figure_html(folder / f"{f.stem}.png", f.caption, here) for f in section.figures]
    commands = "\n".join(_esc(c) for c in section.command.split("; "))
    parts = [f'<section class="panel"><h2 id="{anchor}">{_esc(section.title)}</h2>', *figures]
    parts.append(f'<p class="lead">{_esc(section.question)}</p>')
    parts += [f'<div class="warning">warning: {_esc(w)}</div>' for w in section.warnings]
    parts += [finding_html(f) for f in section.findings if not f.is_check]
    checks = [finding_html(f) for f in section.findings if f.is_check]
    if checks:
        parts += ["<h3>Software checks</h3>", '<p class="meta">identities attnlab must satisfy, not findings</p>']
        parts += checks
    parts.append(
        f'<div class="small"><p>source <code>{_esc(section.source)}</code> &middot; made by:</p>'
        f'<pre class="cmd"><code>{commands}</code></pre>'
        + "".join(f"<p>{_esc(note)}</p>" for note in section.notes)
        + "</div>"
    )
    parts += [collapsed_table_html(folder / f"{t.stem}.csv", t.caption, here) for t in section.tables]
    return "\n".join([*parts, "</section>"])


def findings_list_html(findings: Sequence[tuple[str, str, Finding]]) -> str:
    """Every finding on one line, (anchor, panel title, finding): its label as a badge, its panel linked, its
    claim; collapsed behind the count of each label, with what a label means."""
    counts = ", ".join(f"{n} {_esc(v)}" for v, n in label_counts([f for _, _, f in findings]).items())
    items = "".join(
        f'<li>{badge_html(f.verdict)} <a href="#{a}">{_esc(title)}</a>: {_esc(f.claim)}</li>'
        for a, title, f in findings
    )
    return (
        f"<details><summary>all {len(findings)} findings: {counts}</summary>"
        f'<ul class="findings">{items}</ul><p class="meta">{CALIBRATION_NOTE}</p></details>'
        if findings
        else ""
    )


def page_html(title: str, body: str, script: str = "", style: str = "") -> str:
    """A self-contained page around ``body`` in the panel style and ``style``, sized to the device's width, with the
    sort and paging scripts and ``script``."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{GENERATOR}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_STYLE}{PANEL_STYLE}{style}</style></head><body>\n{body}\n"
        f"<script>{_SORT}{PAGER}{script}</script></body></html>\n"
    )

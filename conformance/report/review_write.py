"""The enhancement review (review.py) written out: review.md and review.html (one page), review-junit.xml (one
test case per question and release, its KEP section kept as a property) and review.yaml (for tools)."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from conformance.report.catalogue import KEP_URL
from conformance.report.review import (
    ANSWERED,
    FAILED,
    NOT_ANSWERED,
    NOT_APPLICABLE,
    NOT_RUN,
    PARTLY,
    Answer,
    Review,
)
from conformance.report.review import requirement_title as title

SYMBOL = {ANSWERED: "✅", PARTLY: "◐", FAILED: "❌", NOT_ANSWERED: "—", NOT_APPLICABLE: "⊘", NOT_RUN: "∅"}
HEADING = "KEP-5007 device binding conditions: evidence for the enhancement review"


def write_review(review: Review, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "html": out / "review.html",
        "markdown": out / "review.md",
        "junit": out / "review-junit.xml",
        "yaml": out / "review.yaml",
    }
    paths["html"].write_text(to_html(review))
    document = review.document(out)
    paths["markdown"].write_text(markdown(document))
    paths["junit"].write_text(junit(review))
    paths["yaml"].write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120))
    return paths


DIFFERS = "⚠ the KEP's text differs from what the binaries did"


def _cell(a: Answer) -> str:
    head = f"{SYMBOL[a.status]} {a.status}"
    if a.status == NOT_RUN:
        return head
    parts = [f"{rid} {c.shown}" for rid, c in a.cells.items()]
    differs = f"; {DIFFERS} ({len(a.differs)})" if a.differs else ""
    return head + (": " + ", ".join(parts) if parts else "") + differs


def _doc_cell(entry: dict[str, Any]) -> str:
    """One question's answer on one release, from the review document (review.yaml), as _cell writes it."""
    status = entry["answer"]
    head = f"{SYMBOL[status]} {status}"
    if status == NOT_RUN:
        return head
    parts = [f"{rid} {shown}" for rid, shown in (entry.get("requirements") or {}).items()]
    differs = entry.get("kepTextDiffers") or []
    return head + (": " + ", ".join(parts) if parts else "") + (f"; {DIFFERS} ({len(differs)})" if differs else "")


def _finding_lines(found: list[dict[str, Any]]) -> list[str]:
    """The KEP's sentences beside what lifecycle runs measured, disagreements first."""
    ordered = sorted(found, key=lambda f: (bool(f.get("agrees")), f.get("question", "")))
    return [
        f'{f["question"]} {"agrees" if f.get("agrees") else "DIFFERS"}: KEP: "{f["kep"]}" Measured: '
        f"{f['measured']} ({f['run']})"
        for f in ordered
    ]


def finding_lines(review: Review, release: str) -> list[str]:
    return _finding_lines(review.findings(release))


def _releases_line(review: Review) -> list[str]:
    lines = [f"- {run.release}: {run.label}, result {run.report.get('result')}" for run in review.runs]
    lines += [f"- {v}: **not run**: {why}" for v, why in review.missing.items()]
    return lines


def markdown(doc: dict[str, Any], top: str = "#") -> str:
    """The page from the review document (review.yaml): what review.md holds, and what the docs site's "For the
    enhancement review" page shows of the last measured review (`top`: the heading level of its title)."""
    esc = lambda text: str(text).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    sub = top + "#"
    versions = sorted({v for q in doc["questions"] for v in q["releases"]}, key=list(doc["figures"]).index)
    lines = [
        f"{top} {HEADING}",
        "",
        f"{doc['date']} · [KEP-5007]({KEP_URL}) · {len(doc['runs'])} runs merged",
        "",
        *[f"- {r['kubernetes']}: {r.get('label') or r['profile']}, result {r.get('result')}" for r in doc["runs"]],
        *[f"- {v}: **not run**: {why}" for v, why in (doc.get("notRun") or {}).items()],
        "",
        f"{sub} Not answered by any run yet",
        "",
        *[
            f"- **{q['id']}** {esc(q['question'])}: {esc(q['notAnswered'])}"
            for q in doc["questions"]
            if q.get("notAnswered")
        ],
        *[f"- lifecycle run not run: {esc(note)}" for note in doc.get("lifecycleNotRun") or []],
        "",
        f"{sub} Questions and their answers per release",
        "",
        "| question | " + " | ".join(versions) + " |",
        "|---|" + "---|" * len(versions),
    ]
    for q in doc["questions"]:
        note = f"<br>{esc(q['note'])}" if q.get("note") else ""
        cells = " | ".join(esc(_doc_cell(q["releases"][v])) for v in versions)
        lines.append(f"| **{q['id']}** ({esc(q['section'])}) {esc(q['question'])}{note} | {cells} |")
    for name, per in (
        (
            "The KEP's text beside what the binaries did",
            lambda v: _finding_lines((doc.get("findings") or {}).get(v) or []),
        ),
        ("Figures", lambda v: (doc.get("figures") or {}).get(v) or []),
        ("Known upstream defects", lambda v: (doc.get("knownDefects") or {}).get(v) or []),
    ):
        lines += ["", f"{sub} {name} per release", ""]
        for v in versions:
            found = per(v)
            lines.append(f"- **{v}**: " + ("none" if not found else ""))
            lines += [f"  - {esc(line)}" for line in found]
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:90%}th{background:#f4f4f4;text-align:left}
.answered{background:#e8f7e8}.partly{background:#eef7e0}.failed{background:#fde2e2}.not-answered{background:#fff0c2}
.not-run{background:#eee}.not-applicable{background:#f4f4f4}
.differs{color:#a40}.open{border:2px solid #c90;padding:0.5em 1em;background:#fff8e0}
"""


def to_html(review: Review) -> str:
    esc = html.escape
    versions = review.releases
    head = "".join(f"<th>{esc(v)}</th>" for v in versions)
    rows = []
    for row in review.answers():
        q = row[0].question
        tds = []
        for a in row:
            reqs = "".join(
                f"<li title='{esc(c.reason[:300])}'>{esc(title(rid))}: <b>{esc(c.shown)}</b></li>"
                for rid, c in a.cells.items()
            )
            shows_why = a.status in (NOT_ANSWERED, NOT_APPLICABLE, PARTLY) and a.why
            why = f"<br><small>{esc(a.why)}</small>" if shows_why else ""
            if a.differs:
                why += f"<br><small class='differs'>{esc(DIFFERS)}: " + esc("; ".join(f["measured"] for f in a.differs))
                why += "</small>"
            css = a.status.replace(" answered", "").replace(" ", "-")
            tds.append(f'<td class="{css}">{SYMBOL[a.status]} {esc(a.status)}{why}<ul>{reqs}</ul></td>')
        note = f"<br><small>{esc(q.note)}</small>" if q.note else ""
        rows.append(
            f"<tr><th>{esc(q.id)} <small>{esc(q.section)}</small><br>{esc(q.text)}{note}</th>{''.join(tds)}</tr>"
        )
    unanswered = "".join(f"<li><b>{esc(q.id)}</b> {esc(q.text)}: {esc(q.open)}</li>" for q in review.unanswered())
    unanswered += "".join(f"<li>lifecycle run not run: {esc(note)}</li>" for note in review.notes)
    runs = "".join(f"<li>{esc(line.removeprefix('- '))}</li>" for line in _releases_line(review))
    extra = []
    for name, per in (
        ("The KEP's text beside what the binaries did", lambda v: finding_lines(review, v)),
        ("Figures", review.figures),
        ("Known upstream defects", review.defects),
    ):
        items = "".join(
            f"<li><b>{esc(v)}</b>: {'none' if not per(v) else ''}<ul>"
            + "".join(f"<li>{esc(x)}</li>" for x in per(v))
            + "</ul></li>"
            for v in versions
        )
        extra.append(f"<h2>{name} per release</h2><ul>{items}</ul>")
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(HEADING)}</title><style>{_CSS}"
        f"</style></head><body><h1>{esc(HEADING)}</h1><p>{esc(review.date)} · <a href='{KEP_URL}'>KEP-5007</a> · "
        f"{len(review.runs)} runs merged</p><ul>{runs}</ul>"
        f"<div class='open'><h2>Not answered by any run yet</h2><ul>{unanswered}</ul></div>"
        f"<h2>Questions and their answers per release</h2><table><tr><th>question</th>{head}</tr>{''.join(rows)}"
        f"</table>{''.join(extra)}</body></html>\n"
    )


def junit(review: Review) -> str:
    """One testsuite per release, one testcase per question: failed where a requirement failed, skipped where the
    question is not (fully) answered there, with the KEP section, the question and the outcomes as properties."""
    root = ET.Element("testsuites", name=HEADING)
    for v, column in zip(review.releases, zip(*review.answers(), strict=True), strict=True):
        suite = ET.SubElement(root, "testsuite", name=f"KEP-5007 review: Kubernetes {v}")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for a in column:
            q = a.question
            case = ET.SubElement(
                suite, "testcase", classname=f"KEP-5007.review.{q.part}", name=f"{q.id} {q.text}"[:200]
            )
            props = ET.SubElement(case, "properties")
            values = {
                "kep_section": q.section,
                "question": q.text,
                "requirements": ", ".join(f"{rid}={c.shown}" for rid, c in a.cells.items()) or ", ".join(q.answers),
                "answer": a.status,
                **({"kep_text_differs": "; ".join(f["measured"] for f in a.differs)} if a.differs else {}),
            }
            for name, value in values.items():
                ET.SubElement(props, "property", name=name, value=value)
            counts["tests"] += 1
            if a.status == FAILED:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=a.why[:1000]).text = "\n".join(
                    f"{rid}: {c.shown}: {c.reason}" for rid, c in a.cells.items() if c.outcome == "failed"
                )
            elif a.status != ANSWERED:
                counts["skipped"] += 1
                why = a.why or (review.missing.get(v) if a.status == NOT_RUN else "") or a.status
                ET.SubElement(case, "skipped", message=f"{a.status}: {why}"[:1000])
        for key, n in counts.items():
            suite.set(key, str(n))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

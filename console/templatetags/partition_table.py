"""The topic page's partition rows and config values, built in Python: a page of
partitions renders in milliseconds instead of through the template language. Keys
(data-k) match console.monitor.deltas, so live updates reach the rows shown."""

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from console import fmt, units
from console.monitor.deltas import replicas_html, spans_html

register = template.Library()


@register.filter
def config_value(entry: dict) -> str:
    """A DescribeConfigs row's value in words (units.config_value)."""
    if entry.get("sensitive"):
        return "(hidden)"
    return units.config_value(entry["name"], entry.get("value"))


def _state(p: dict) -> str:
    spans = [[label, f"pill {cls}"] for label, cls in p.get("problems") or ()]
    return spans_html(spans or [["ok", "pill ok"]])


def _replica_detail(name: str, p: dict) -> str:
    """Per-replica LEO, lag and size, folded: one line per partition until opened."""
    behind = [r for r in p["replica_detail"] if not r["alive"] or r["lag"]]
    summary = f"{len(p['replica_detail'])} replicas" + (
        f', <span class="txt-warn">{len(behind)} behind</span>' if behind else ""
    )
    out = [f"<details class='fold'><summary>{summary}</summary>"]
    for r in p["replica_detail"]:
        rk = f"r:{name}:{p['partition']}:{r['broker']}"
        lag = "offline" if not r["alive"] else fmt.num(r["lag"])
        cls = "txt-err" if not r["alive"] else ("txt-warn" if r["lag"] else "")
        out.append(
            f'<div class="rp">broker {r["broker"]}: LEO <b data-k="{rk}:leo">'
            f'{fmt.num(r["leo"])}</b>, lag <b data-k="{rk}:lag" class="{cls}">{lag}</b> '
            f'<span class="muted" data-k="{rk}:size">{fmt.size(r["size"])}</span></div>'
        )
    out.append("</details>")
    return "".join(out)


@register.simple_tag
def partition_rows(topic_name: str, rows: list[dict]) -> str:
    """One row per partition of the page; the replicas' detail folded inside it."""
    name = escape(topic_name)
    out = ["<tbody>"]
    for p in rows:
        k = f"p:{name}:{p['partition']}"
        leader = p["leader"] if p["leader"] >= 0 else "none"
        cls = ' class="problem"' if p.get("problems") else ""
        out.append(
            f'<tr{cls}><td class="n">{p["partition"]}</td>'
            f'<td class="n" data-k="{k}:leader">{leader}</td>'
            f'<td class="n" data-k="{k}:epoch">{p["leader_epoch"]}</td>'
            f'<td data-k="{k}:replicas">{replicas_html(p["replicas"], p["isr"], p["leader"])}</td>'
            f'<td class="mono" data-k="{k}:isr">{fmt.ids(p["isr"])}</td>'
            f'<td class="n" data-k="{k}:start">{fmt.num(p["start"])}</td>'
            f'<td class="n" data-k="{k}:hw">{fmt.num(p["hw"])}</td>'
            f'<td class="n" data-k="{k}:records">{fmt.num(p["records"])}</td>'
            f'<td class="n" data-k="{k}:size" data-v="{p["size"] or 0}">{fmt.size(p["size"])}</td>'
            f'<td data-k="{k}:state">{_state(p)}</td>'
            f"<td>{_replica_detail(name, p)}</td></tr>"
        )
    if not rows:
        out.append('<tr><td colspan="11" class="muted">No partition matches.</td></tr>')
    out.append("</tbody>")
    return mark_safe("".join(out))

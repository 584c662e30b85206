"""``bert-kd mechanisms [METHOD ...] [--json]``: run the mechanism checks ([`bert_kd.analysis.mechanisms`][]),
one line per measured quantity; exit 1 when any does not hold."""

from __future__ import annotations

import json
import sys

import click


def _measured(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{name} {number:.3g}" for name, number in value.items())
    return f"{value:.3g}"


def format_line(result) -> str:
    """``method: quantity = measured; expected: …; holds|DOES NOT HOLD``."""
    verdict = "holds" if result.holds else "DOES NOT HOLD"
    return f"{result.method}: {result.quantity} = {_measured(result.measured)}; expected {result.expected}: {verdict}"


@click.command(name="mechanisms")
@click.argument("methods", nargs=-1)
@click.option(
    "--json", "as_json", is_flag=True, help="print one JSON list of {method, quantity, measured, expected, holds}"
)
def mechanisms(methods: tuple[str, ...], as_json: bool) -> None:
    """Show that each method does what its paper's mechanism does, on a tiny controlled case with a known answer
    (all methods without METHOD). Exits 1 when a mechanism does not hold."""
    from bert_kd.analysis.mechanisms import CHECKS, run_checks

    unknown = [name for name in methods if name not in CHECKS]
    if unknown:
        raise click.UsageError(f"no mechanism check named {', '.join(unknown)}; known: {', '.join(sorted(CHECKS))}")
    results = run_checks(list(methods) or None)
    if as_json:
        click.echo(json.dumps([result.as_dict() for result in results], indent=1))
    else:
        for result in results:
            click.echo(format_line(result))
    sys.exit(0 if all(result.holds for result in results) else 1)

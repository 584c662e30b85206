"""``bert-kd results …``: write a table folder's readings into its ``tables/`` from its trial JSONs.

bert-kd results render results/cpu_protocol_v2          # paper_gap.{md,png}, summary.md, claims.md, power.md, gradient_shares.{md,png}
bert-kd results render results/transfer_ablation        # a paired table (paired: arms): tables/paired.md
bert-kd results paper-gap results/cpu_protocol_v2       # one of them
bert-kd results alp-variants results/cpu_protocol_v2_alpha   # tables/reading.md: ALP-KD's claims with another α, beside v2
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bert_kd.analysis import statistics as st

FOLDER = click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
RESAMPLES = click.option(
    "--resamples",
    type=click.IntRange(min=1000),
    default=st.RESAMPLES,
    show_default=True,
    help="bootstrap resamples per claim",
)


PAPER_NOISE = click.option(
    "--paper-noise",
    default=None,
    help="the papers' single-run noise: 'ours' (assumed equal to our single-run noise) or accuracy points; "
    "default: the table's reproduce.paper_noise",
)


def command_line(name: str, folder: Path, resamples: int = st.RESAMPLES, noise: str | None = None) -> str:
    """The command recorded in a file's "Made by:" line (the folder relative to the project)."""
    from bert_kd.analysis.table import project_root

    path = folder.resolve()
    shown = path.relative_to(project_root(path)).as_posix()
    return (
        f"bert-kd results {name} {shown}"
        + ("" if resamples == st.RESAMPLES else f" --resamples {resamples}")
        + ("" if noise is None else f" --paper-noise {noise}")
    )


def write_text(path: Path, text: str) -> None:
    from bert_kd.core.files import write_file_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    click.echo(f"wrote {path}")


def write_figure(path: Path, fig, **options) -> None:
    import matplotlib.pyplot as plt

    from bert_kd.core.files import write_file_atomically

    write_file_atomically(
        path, lambda tmp: fig.savefig(str(tmp), dpi=120, format="png", metadata={"Software": None}, **options)
    )
    plt.close(fig)
    click.echo(f"wrote {path}")


def write_paper_gap(folder: Path, resamples: int, name: str = "paper-gap", noise: str | None = None) -> None:
    from bert_kd.analysis import paper_gap, paper_gap_report

    read = paper_gap.reading(folder.resolve(), resamples, noise)
    command = command_line(name, folder, resamples, noise)
    write_text(folder / "tables" / "paper_gap.md", paper_gap_report.render(read, command))
    write_text(folder / "tables" / "summary.md", paper_gap_report.summary(read, command))
    write_text(folder / "tables" / "claims.md", paper_gap_report.strength(read, command))
    click.echo(
        "\n".join(
            [
                "",
                paper_gap_report.headline_sentence(read.tests),
                "",
                *paper_gap_report.assumptions(read),
                "",
                "The papers' own gains against ours, both noises combined, as stated and adjusted for best-of-grid:",
                *paper_gap_report.z_table(read.tests),
                "",
                paper_gap_report.excluded_sentence(read.tests),
                paper_gap_report.adjusted_sentence(read.tests),
                "",
            ]
        )
    )
    done = paper_gap.finished(read.runs)
    write_figure(
        folder / "tables" / "paper_gap.png",
        paper_gap_report.forest_figure(
            read.tests, f"{folder.resolve().name}: the papers' ordering claims, {done} trials"
        ),
    )


def write_power(folder: Path, resamples: int, name: str = "power") -> None:
    from bert_kd.analysis import paper_gap, power

    read = paper_gap.reading(folder.resolve(), resamples)
    write_text(folder / "tables" / "power.md", power.render(read, command_line(name, folder, resamples)))


def write_gradient_shares(folder: Path, name: str = "gradient-shares") -> None:
    from bert_kd.analysis import gradient_shares

    text, fig = gradient_shares.render(folder.resolve(), command_line(name, folder))
    write_text(folder / "tables" / "gradient_shares.md", text)
    write_figure(folder / "tables" / "gradient_shares.png", fig, bbox_inches="tight")


def write_paired(folder: Path, resamples: int, name: str = "paired") -> None:
    """tables/paired.md: a paired table's reading ([`bert_kd.analysis.paired`][])."""
    from bert_kd.analysis import paired
    from bert_kd.analysis.table import table_spec

    sweep = table_spec(folder.resolve())
    cells, _ = paired.folder_cells(folder.resolve(), resamples)
    head = f"# {folder.resolve().name}: {sweep.arms[1]} against {sweep.arms[0]}\n\n"
    about = f"{sweep.description}\n\n" if sweep.description else ""
    made = f"Made by: `{command_line(name, folder, resamples)}`\n\n"
    write_text(folder / "tables" / "paired.md", head + about + made + paired.reading(cells, sweep.arms))


def is_paired(folder: Path) -> bool:
    from bert_kd.analysis.table import table_spec

    return bool(table_spec(folder.resolve()).arms)


def is_alp_variant(folder: Path) -> bool:
    """Every row of the folder's table stands in for ALP (``alp_<name>``): a variant table read beside v2."""
    from bert_kd.analysis import alp_variants
    from bert_kd.analysis.table import table_spec

    names = [m.name for m in table_spec(folder.resolve()).methods]
    return bool(names) and all(name.startswith(alp_variants.BASE_ROW + "_") for name in names)


def write_alp_variants(folder: Path, resamples: int, name: str = "alp-variants") -> None:
    from bert_kd.analysis import alp_variants

    base = alp_variants.default_base(folder)
    text = alp_variants.render(folder, base, resamples, command_line(name, folder, resamples))
    write_text(folder / "tables" / "reading.md", text)


def guarded(action, folder: Path):
    """Run ``action`` once ``folder`` is known to be a table folder with trials
    ([`table_folder`][table.table_folder]); a [`UserError`][config.errors.UserError]
    prints its one block and exits with status 2, nothing written."""
    from bert_kd.analysis.table import table_folder
    from bert_kd.config.errors import USER_ERROR_EXIT, UserError

    try:
        table_folder(folder)
        action()
    except UserError as error:
        click.echo(error.block(), err=True)
        sys.exit(USER_ERROR_EXIT)


@click.group(name="results")
def results() -> None:
    """Readings of a committed table folder (results/<table>), from its trial JSONs."""


@results.command(name="paper-gap")
@FOLDER
@RESAMPLES
@PAPER_NOISE
def paper_gap_command(folder: Path, resamples: int, paper_noise: str | None) -> None:
    """tables/paper_gap.{md,png}, summary.md, claims.md: the papers' claims tested; prints the assumed noise, its
    sensitivity line and each paper gain's z, as stated and adjusted for best-of-grid."""
    guarded(lambda: write_paper_gap(folder, resamples, noise=paper_noise), folder)


@results.command(name="power")
@FOLDER
@RESAMPLES
def power_command(folder: Path, resamples: int) -> None:
    """tables/power.md: what the table resolves, alone and after Holm."""
    guarded(lambda: write_power(folder, resamples), folder)


@results.command(name="gradient-shares")
@FOLDER
def gradient_shares_command(folder: Path) -> None:
    """tables/gradient_shares.{md,png}: each loss term's share of the student's gradient."""
    guarded(lambda: write_gradient_shares(folder), folder)


@results.command(name="alp-variants")
@FOLDER
@RESAMPLES
def alp_variants_command(folder: Path, resamples: int) -> None:
    """tables/reading.md: ALP-KD's claims with the folder's ALP rows in place of v2's ALP (its sibling folder)."""
    guarded(lambda: write_alp_variants(folder, resamples), folder)


@results.command(name="render")
@FOLDER
@RESAMPLES
def render_command(folder: Path, resamples: int) -> None:
    """Every reading of the folder (paper-gap, power, gradient-shares; a paired table: its paired reading)."""

    def everything() -> None:
        if is_paired(folder):
            write_paired(folder, resamples, "render")
            return
        if is_alp_variant(folder):  # rows standing in for v2's ALP: read beside v2, no paper claim of their own
            write_alp_variants(folder, resamples, "render")
            return
        write_paper_gap(folder, resamples, "render")
        write_power(folder, resamples, "render")
        write_gradient_shares(folder, "render")

    guarded(everything, folder)

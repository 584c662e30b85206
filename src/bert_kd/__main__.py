"""bert-kd file for ensuring the package is executable
as `bert-kd` and `python -m bert_kd`
"""

import sys
from pathlib import Path
from typing import Any

from bert_kd.kedro_project.quiet import quiet_dataset_io, silence_known_warnings

#: What ``bert-kd --help`` prints above ``kedro run``'s options: every command ``bert-kd`` has.
COMMANDS = """bert-kd: knowledge distillation of BERT-family models on GLUE.

  bert-kd [run options]                     run pipelines, as `kedro run` (its options below)
  bert-kd results render|paper-gap|power|gradient-shares FOLDER
                                            write a table folder's readings (results/<table>/tables/)
                                            from its trial JSONs; `bert-kd results --help` says more
  bert-kd mechanisms [METHOD ...] [--json]  each method's mechanism on a tiny case with a known answer
                                            (exit 1 when one does not hold)
  bert-kd card|push …                       a model's Hugging Face card, and its push to the hub
  python -m bert_kd.tracking ui             the runs table's URL and the MLflow UI (scripts/mlflow_ui.sh)
  kedro ipython, kedro viz, …               Kedro's other commands work in the project as usual

Run options (`kedro run`):
"""


def main(*args, **kwargs) -> Any:
    """``bert-kd [run options]`` is ``kedro run``; ``bert-kd results …`` reads committed tables
    ([`bert_kd.analysis.cli`][]); ``bert-kd mechanisms`` runs the mechanism checks
    ([`bert_kd.analysis.mechanisms`][]); ``bert-kd card`` / ``bert-kd push`` write a model
    card and push a model to the Hugging Face hub ([`bert_kd.cli`][]); ``bert-kd --help`` lists them."""
    silence_known_warnings()
    quiet_dataset_io()
    argv = list(args[0]) if args else sys.argv[1:]
    if argv[:1] in (["--help"], ["-h"]):
        print(COMMANDS)
    if argv[:1] in (["card"], ["push"]):
        from bert_kd.cli import cli

        return cli.main(argv, prog_name="bert-kd", standalone_mode=not hasattr(sys, "ps1"))
    if argv[:1] == ["mechanisms"]:
        from bert_kd.analysis.mechanisms_cli import mechanisms

        return mechanisms.main(argv[1:], prog_name="bert-kd mechanisms", standalone_mode=not hasattr(sys, "ps1"))
    if argv[:1] == ["results"]:
        from bert_kd.analysis.cli import results

        return results.main(argv[1:], prog_name="bert-kd results", standalone_mode=not hasattr(sys, "ps1"))
    # Kedro loads here, after the commands that do not need it: importing it logs its logging set-up on stdout,
    # which `bert-kd mechanisms --json` must not carry
    from kedro.framework.cli.utils import find_run_command
    from kedro.framework.project import configure_project

    package_name = Path(__file__).parent.name
    configure_project(package_name)

    interactive = hasattr(sys, "ps1")
    kwargs["standalone_mode"] = not interactive

    run = find_run_command(package_name)
    return run(*args, **kwargs)


if __name__ == "__main__":
    main()

"""``grprune calibrate``: a run's calibration report and post-hoc calibration
(:func:`grprune.calibration.calibrate_run`)."""

from __future__ import annotations

from pathlib import Path

import click

from grprune.cli.options import option


@click.command("calibrate")
@click.argument("run_dir", type=click.Path(path_type=Path))
@option("--method", type=click.Choice(["temperature", "platt", "isotonic"]),
        default="temperature", show_default=True, envvar="GRPRUNE_CALIBRATE_METHOD",
        help="the calibration fitted on the validation split: temperature scaling of the "
             "logit (Guo et al. 2017; keeps the ranking), Platt's logistic regression on the "
             "logit, or isotonic regression on the probability (scikit-learn)")
@option("--bins", type=int, default=15, show_default=True,
        help="equal-width confidence bins of the ECE and the reliability diagram")
@option("--out", "out_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
        help="folder of the reliability diagram (reliability.png) [default: "
             "RUN_DIR/calibration]")
@option("--device", default="auto", show_default=True,
        help="auto (CUDA when present), cpu, cuda or cuda:N")
def calibrate(run_dir, method, bins, out_dir, device) -> None:
    """Report how well a binary classification run's probabilities are calibrated, and
    fit a post-hoc calibration.

    Scores the run's validation and test splits as the trainer evaluated them, fits the
    calibration on validation, and prints the expected calibration error (ECE, 15
    equal-width confidence bins, Guo et al. 2017), the Brier score and the negative
    log-likelihood before and after calibration on both splits. Writes calibration.json
    into the run directory (the method, its parameters, the numbers and the test
    split's bins), which `grprune predict --calibrated` applies, and the test split's
    reliability diagram (PNG). Calibrating again replaces calibration.json.

    \b
    Examples:
      grprune calibrate runs/ogbg-molbbbp/RUN
      grprune calibrate runs/ogbg-molbbbp/RUN --method isotonic --out reports/
    """
    from grprune.calibration import calibrate_run
    from grprune.inference import load_run

    if bins < 1:
        from grprune.errors import GrpruneError
        raise GrpruneError(f"--bins must be at least 1, got {bins}")
    run = load_run(run_dir, device)
    report = calibrate_run(run, method=method, bins=bins, out_dir=out_dir,
                           log=lambda msg: click.echo(f"grprune: {msg}", err=True))
    from grprune.calibration import Calibrator
    rec = report.record
    click.echo(f"{run.dataset_name} {run.run_dir.name}: "
               f"{Calibrator(rec.method, rec.params).describe()}, fitted on the validation split")
    for line in report.lines():
        click.echo(line)
    click.echo(f"ECE on test: {rec.test['before']['ece']:.4f} before, "
               f"{rec.test['after']['ece']:.4f} after ({rec.bins} bins)")
    from grprune.record.calibration import calibration_file
    click.echo(f"grprune: wrote {calibration_file(run.run_dir)} and {report.diagram}", err=True)

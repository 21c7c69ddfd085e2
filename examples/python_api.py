"""grprune from Python: train PrunE on the bundled ogbg-molbbbp, read its results, score
new molecules and explain a few test graphs.

    .venv/bin/python examples/python_api.py                      # 5 epochs, all graphs
    .venv/bin/python examples/python_api.py --epochs 1 --limit 48 --out /tmp/tiny

Running it again with the same options skips the training (the run directory holds the
finished run) and goes straight to the results.
"""

from __future__ import annotations

import argparse

import grprune


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--limit", type=int, default=0, help="graphs per split (0 = all)")
    ap.add_argument("--out", default="runs/example-python-api")
    args = ap.parse_args(argv)

    # the same options and the same run directory handling as `grprune run`
    run = grprune.train(data="ogbg-molbbbp", reg="size,eps-align", epochs=args.epochs,
                        seed=0, device="cpu", out=args.out, progress="none",
                        data_limit=args.limit,                    # -H data.limit=...
                        hparams={"reg.size.eta": 0.85})           # -H reg.size.eta=0.85
    s = run.summary
    print(f"{run.path}: valid {s.metric} {s.valid:.4f}, test {s.test:.4f}, "
          f"best epoch {s.best_epoch}, config hash {run.config.hash}")

    # results.jsonl, one row per epoch, nested fields joined with dots
    cols = ["epoch", "phase", "loss.total", f"valid.{s.metric}", f"test.{s.metric}"]
    print(run.records[cols].tail(3).to_string(index=False))

    # new molecules: class probabilities and how many bonds the selector keeps
    pred = run.predict(["CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "CC(=O)Oc1ccccc1C(=O)O"])
    print(pred[["smiles", "prob_1", "num_bonds", "bonds_kept"]].to_string(index=False))

    # kept bonds of three test graphs: edges.csv and pictures in RUN/explain
    test_ids = run.part_indices(run.load_dataset(), "test")[:3]
    ex = run.explain(part="test", graphs=test_ids, out=run.path / "explain")
    print(f"explained graphs {ex.graphs} -> {ex.out_dir}: {', '.join(ex.files)}")
    print(ex.edges.groupby("graph_index")["kept"].mean().rename("kept bonds").to_string())


if __name__ == "__main__":
    main()

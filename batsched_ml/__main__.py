from batsched_ml.cli import program

raise SystemExit(program())

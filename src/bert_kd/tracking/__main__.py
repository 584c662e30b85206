"""``python -m bert_kd.tracking ui``: print the runs-table URL and start ``mlflow ui``."""

from bert_kd.tracking.ui import main

main()

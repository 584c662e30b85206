"""The library: GLUE data, models, the one training loop and the distillation methods, plus the
files, metrics and reports they write. Kedro-free and MLflow-free; it reads only [`bert_kd.config`][].
"""

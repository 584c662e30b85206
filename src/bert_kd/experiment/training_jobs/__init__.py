"""The bodies of the training jobs, Kedro-free: what each content-keyed job trains and how.

- [`teacher`][]: fine-tune a teacher on the task;
- [`ted_filters`][]: TED Stage I, the task-aware filters (and TED Stage II's student start);
- [`student`][]: the one distillation body, for one teacher and for K teachers.

The Kedro nodes (``pipelines/*/nodes.py``) and a sweep trial call these; a node only turns its
inputs into the job's arguments.
"""

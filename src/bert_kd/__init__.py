"""bert-kd
"""

from bert_kd.quiet import quiet_dataset_io, silence_known_warnings

silence_known_warnings()
quiet_dataset_io()

__version__ = "0.1"

"""bert-kd
"""

from bert_kd.quiet import silence_known_warnings

silence_known_warnings()

__version__ = "0.1"

"""bert-kd
"""

__version__ = "0.1"

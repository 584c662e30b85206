"""What a user writes and how a mistake is told: the typed parameter blocks and the user-error type.

The bottom layer: it imports no other bert_kd module.
"""

"""Pure-PyTorch maths of the distillation methods (layer mappings and losses).

Kedro-free. Layer numbers are 1-based, as in the papers (= index into HF ``hidden_states``).
"""

"""Readings of committed sweep tables (``results/<table>/``), computed from their trial JSONs alone.

``bert-kd results render results/cpu_protocol_v2`` writes every reading of a table folder into its
``tables/``: [`paper_gap`][] (the papers' claims tested: [`paper_claims`][] tests them, [`paper_gap_report`][] writes them), [`power`][]
(what the table can resolve) and [`gradient_shares`][] (which loss term trains the
student); [`statistics`][] holds the tests they share. [`mechanisms`][] (``bert-kd mechanisms``) shows, on tiny
controlled cases, that each method does what its paper's mechanism does.
"""

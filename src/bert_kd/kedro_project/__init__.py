"""What ``settings.py`` hands Kedro: the project hooks, catalog datasets, the config loader, the
session class, the checks made before a run and the warnings silenced at start-up.
"""

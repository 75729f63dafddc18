"""Trace simulator: the openb loader, the FGD paper's protocol, replays and their metrics."""

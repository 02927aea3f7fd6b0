"""Statistics over runs: the paired comparison of two runs over the problems both scored
(the baseline gate and `pytest-agenteval report`). The metrics of one run are the contract's
(`api.metrics`)."""

"""The statistics, in one place and pure-numeric: the percentile bootstrap over clusters
(`bootstrap`), Wilson intervals and clustered proportions (`proportions`), pass@k
(`pass_at_k`), Krippendorff's alpha (`krippendorff`), the paired comparison of two runs (`paired`) and
anytime-valid confidence sequences for gates with a confidence (`sequential`).

This is the bottom layer: it imports nothing else of ours (numpy and the standard library
only), so the public contract (`api.metrics`, whose default metrics carry intervals) and
every layer above can use the same code. Before it, the bootstrap existed in three copies
(api/metrics.py, stats/paired.py, tasks/datagen/_stats.py) that differed in how they treated
an undefined resample. Nothing is imported here: `stats.paired` is read at start-up (by the
baseline comparison) and must not pull numpy in with it."""

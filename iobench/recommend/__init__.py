"""`iobench recommend`: where a dataset should live and whether a server fits the job, from a
sweep's measurements (docs/recommend.md).

model (arithmetic) <- calibrate (what a sweep measured) -> options (ranked) -> crossovers,
hypotheses (the published rules, tested); validate (each cell predicted from the others);
render and cli (the command).
"""

"""The training record (issue 45): what a run's training did, read from worker 0's log.

Pure: it recognises MXNet's standard log lines and the opt-in progress line
(`lines`), folds them, a bounded chunk at a time, into what a run has shown so far
(`reading`), derives progress, ETA and the epochs a job declares (`progress`),
resource use from pod objects (`resources`), and gives the record of one run and
its two stored forms (`runrecord`, `stored`). Reading the log, and where the record
is shown, are the callers' (the kube edge, the outputs).
"""

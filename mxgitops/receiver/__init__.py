"""The webhook receiver: a verified push starts a Job from the CronJob; it never syncs
itself.
"""

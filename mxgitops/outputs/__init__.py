"""Where a sync's outcome goes: the Summary, the report and the note, and the sinks (forge
statuses, Events, metrics).
"""

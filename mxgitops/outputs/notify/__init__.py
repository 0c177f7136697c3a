"""Chat notifications: a job's failure, success, disruption or long wait told to the
chat its team lives in (`sink.py`), once per transition (`outbox.py`)."""

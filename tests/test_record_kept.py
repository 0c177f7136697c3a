"""A finished job's change carries the summary of its run's record that the ledger
keeps, so every output still shows what it reached once its pods and logs are gone."""

from __future__ import annotations

from pathlib import Path

from mxgitops.objects import LiveObjects
from mxgitops.planning.ledger import Finished, Ledger
from mxgitops.planning.plan import plan
from mxgitops.record.runrecord import TrainingRecord
from mxgitops.record.stored import summary_json
from tests.helpers.plan import BATCH, NS, OPTIONS, job, only

LOG = Path(__file__).parent / "data" / "training-logs" / "mxnet-1.9.1-module-fit.log"


def _ledger(spec_hash: str, record: str) -> Ledger:
    entry = Finished(NS, "a", spec_hash, "Succeeded", "t", record=record)
    return Ledger({(NS, "a"): entry}, runtimes=BATCH)


def test_a_finished_job_whose_pods_are_gone_shows_the_record_the_ledger_keeps() -> None:
    a = job("a")
    record = TrainingRecord(declared_epochs=3).with_chunk(LOG.read_text(), at_end=True)
    kept = only(plan([a], LiveObjects(), _ledger(a.spec_hash, summary_json(record)), OPTIONS))
    assert kept.record is not None
    assert kept.record.log.latest == record.log.latest
    assert kept.record.progress.percent == record.progress.percent


def test_a_damaged_or_other_specs_record_is_left_out_and_the_plan_stands() -> None:
    a = job("a")
    damaged = only(plan([a], LiveObjects(), _ledger(a.spec_hash, '{"v": 99}'), OPTIONS))
    assert damaged.record is None and damaged.state == "Succeeded"
    record = summary_json(TrainingRecord().with_chunk(LOG.read_text(), at_end=True))
    other = only(plan([job("a", workers=3)], LiveObjects(), _ledger(a.spec_hash, record), OPTIONS))
    assert other.record is None

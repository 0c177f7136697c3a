"""A small distributed MXNet training, baked into the node's training image.

Run as every replica of a ``dist`` job: with ``DMLC_ROLE`` scheduler or server,
``import mxnet`` runs that role (ps-lite) until the workers are done, then exits 0.
A worker fits a linear model to data it generates itself (its own shard: the seed is
its rank) with a ``dist_sync`` kvstore: each step it pushes its gradients, pulls the
sum over all workers and applies the mean. At the end it asserts that the loss fell
and that the weights agree across workers (the mean of every worker's weights,
summed through the kvstore, equals its own), then prints one line
``training result: {...}`` and exits 0; any failed assertion exits 1. Each epoch it
prints the training record's opt-in line (``MXGITOPS_PROGRESS {...}``, the manual's
"See how your training is doing"): a custom loop's way to be followed.

A ``local`` job (no scheduler: ``DMLC_NUM_SERVER=0``, as Kubeflow's operator and
mxgitops set it, or ``MX_LOCAL=1``) trains the same model alone with a ``local``
kvstore: its ``DMLC_ROLE`` is worker, but there is no parameter server to reach.
"""

import json
import os
import sys

import mxnet as mx
import numpy as np

TRUE_W = np.array([[2.0], [-3.4]])
TRUE_B = 4.2
SAMPLES, BATCH, EPOCHS, RATE = 240, 24, 6, 0.1


def shard(rank):
    rng = np.random.RandomState(1000 + rank)
    x = rng.randn(SAMPLES, 2)
    y = x @ TRUE_W + TRUE_B + 0.01 * rng.randn(SAMPLES, 1)
    return mx.nd.array(x), mx.nd.array(y)


def loss_of(x, y, w, b):
    return float(((mx.nd.dot(x, w) + b - y) ** 2).mean().asscalar())


def main():
    servers = os.environ.get("DMLC_NUM_SERVER", "0")
    local = os.environ.get("MX_LOCAL") == "1" or "DMLC_ROLE" not in os.environ or servers == "0"
    kv = mx.kv.create("local" if local else "dist_sync")
    rank, workers = kv.rank, kv.num_workers
    x, y = shard(rank)
    w, b = mx.nd.zeros((2, 1)), mx.nd.zeros((1, 1))
    w.attach_grad()
    b.attach_grad()
    kv.init(0, mx.nd.zeros((2, 1)))
    kv.init(1, mx.nd.zeros((1, 1)))
    kv.init(2, mx.nd.zeros((3, 1)))
    before = loss_of(x, y, w, b)
    summed_w, summed_b = mx.nd.zeros((2, 1)), mx.nd.zeros((1, 1))
    for epoch in range(EPOCHS):
        for start in range(0, SAMPLES, BATCH):
            xb, yb = x[start : start + BATCH], y[start : start + BATCH]
            with mx.autograd.record():
                loss = ((mx.nd.dot(xb, w) + b - yb) ** 2).mean()
            loss.backward()
            kv.push(0, w.grad)
            kv.push(1, b.grad)
            kv.pull(0, out=summed_w)
            kv.pull(1, out=summed_b)
            w[:] = w - RATE * summed_w / workers
            b[:] = b - RATE * summed_b / workers
        done = {
            "epoch": epoch + 1,
            "epochs": EPOCHS,
            "metrics": {"train-loss": loss_of(x, y, w, b)},
        }
        print(f"MXGITOPS_PROGRESS {json.dumps(done)}", flush=True)
    after = loss_of(x, y, w, b)
    mine = mx.nd.concat(w, b, dim=0).asnumpy()  # a copy: a push may reuse its buffer
    kv.push(2, mx.nd.array(mine))
    summed = mx.nd.zeros((3, 1))
    kv.pull(2, out=summed)
    mean = summed.asnumpy() / workers
    result = {
        "rank": rank,
        "workers": workers,
        "kvstore": kv.type,
        "loss_before": round(before, 6),
        "loss_after": round(after, 6),
        "weights": [round(v, 4) for v in mine.ravel().tolist()],
        "mean_weights": [round(v, 4) for v in mean.ravel().tolist()],
    }
    print("training result: " + json.dumps(result, sort_keys=True), flush=True)
    assert after < before / 100, f"the loss did not fall: {before} -> {after}"
    assert np.allclose(mine, mean, atol=1e-5), "workers' weights differ"
    assert np.allclose(mine.ravel(), [*TRUE_W.ravel(), TRUE_B], atol=0.05), "not fit"


if __name__ == "__main__":
    try:
        main()
    except AssertionError as err:
        print(f"training failed: {err}", file=sys.stderr, flush=True)
        sys.exit(1)

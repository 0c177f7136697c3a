"""A real ``Module.fit`` of MXNet 1.9.1, baked into the node's training image.

What a user's script most often is: a symbolic network trained by ``Module.fit``
with a ``dist_sync`` kvstore, ``mx.callback.Speedometer`` every few batches, an
eval metric and ``eval_data``, so that MXNet itself logs the lines the training
record recognises (``Epoch[E] Batch [..]\\tSpeed: ..``, ``Epoch[E] Train-accuracy=``,
``Epoch[E] Time cost=``, ``Epoch[E] Validation-accuracy=``). Nothing here prints for
mxgitops.

Run as every replica of a ``dist`` job: with ``DMLC_ROLE`` scheduler or server,
``import mxnet`` runs that role (ps-lite) until the workers are done, then exits 0.
A worker classifies points it generates itself (its own shard: the seed is its
rank; the validation set is the same for every worker) into two classes, for
``--num-epochs`` epochs at learning rate ``--lr``. Each epoch lasts at least
``--epoch-seconds`` (its batches are paced): the work itself takes a fraction of a
second, and a sync must be able to land while the job trains.
"""

import argparse
import logging
import time

import mxnet as mx
import numpy as np

FEATURES, TRAIN, VALIDATION, BATCH = 8, 480, 240, 24


def points(seed, count):
    """``count`` points of two classes: which side of a fixed plane, with noise."""
    plane = np.random.RandomState(7).randn(FEATURES)
    rng = np.random.RandomState(seed)
    x = rng.randn(count, FEATURES).astype("float32")
    y = ((x @ plane + 0.5 * rng.randn(count)) > 0).astype("float32")
    return x, y


def network():
    data = mx.sym.Variable("data")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=16), act_type="relu")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(hidden, num_hidden=2), name="softmax")


class Pace:
    """A batch-end callback: the epoch's batches spread over at least ``seconds``."""

    def __init__(self, seconds, batches):
        self.each = seconds / batches
        self.last = time.monotonic()

    def __call__(self, param):
        wait = self.each - (time.monotonic() - self.last)
        if wait > 0:
            time.sleep(wait)
        self.last = time.monotonic()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--num-epochs", type=int, default=5)
    parser.add_argument("--epoch-seconds", type=float, default=3.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    kv = mx.kv.create("dist_sync")
    x, y = points(100 + kv.rank, TRAIN)
    vx, vy = points(1, VALIDATION)
    train = mx.io.NDArrayIter(x, y, BATCH, shuffle=True, label_name="softmax_label")
    validation = mx.io.NDArrayIter(vx, vy, BATCH, label_name="softmax_label")
    mx.random.seed(42)
    module = mx.mod.Module(network(), context=mx.cpu())
    module.fit(
        train,
        eval_data=validation,
        eval_metric="acc",
        kvstore=kv,
        optimizer="sgd",
        optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
        initializer=mx.init.Xavier(),
        num_epoch=args.num_epochs,
        batch_end_callback=[
            mx.callback.Speedometer(BATCH, 5),
            Pace(args.epoch_seconds, TRAIN // BATCH),
        ],
    )


if __name__ == "__main__":
    main()

"""Kubernetes resource quantities (`8`, `500m`, `4Gi`, `8000000u`), read as the API
server reads them: the policy counts GPUs with them, so a quantity read otherwise
than Kubernetes reads it is a way past `maxGpusPerJob`.

Two halves. What Kubernetes accepts is its documented grammar (apimachinery's
`resource.Quantity`): a signed decimal number, then a binary suffix (Ki..Ei), a
decimal one (n, u, m, k, M, G, T, P, E) or an exponent (e3, E-2); no spaces, no
`NaN`, no `1_000`, which Python's Decimal would take. What an accepted quantity
is worth is computed by the official Kubernetes client's own parser,
`kubernetes/utils/quantity.py`. That file imports only `decimal`; importing it
the usual way would run `kubernetes/__init__.py`, which loads the whole API
client (about half a second, on `validate`'s path, tests/cli/test_lazy_imports.py),
and the import contract keeps `kubernetes` to the cluster modules. So it is
loaded alone from the installed package, by path: the one, documented,
exception to that contract (pyproject.toml), and no copy of its code here.
"""

from __future__ import annotations

import importlib.util
import re
from decimal import Decimal
from functools import cache
from pathlib import Path
from types import ModuleType

_GRAMMAR = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"  # <signedNumber>
    r"(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?"  # <decimalExponent> | <binarySI> | <decimalSI>
)
_MAX_LENGTH = 100  # far beyond any real quantity; bounds what Decimal is asked to do


class QuantityError(ValueError):
    """Not a quantity Kubernetes accepts; the message says why, as one phrase."""


def parse(value: object) -> Decimal:
    """The value of a quantity as a manifest writes it (a string, or a YAML number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise QuantityError(f"{_shown(value)} is not a quantity (a number or a string)")
    text = repr(value) if isinstance(value, float) else str(value)
    if len(text) > _MAX_LENGTH or not _GRAMMAR.fullmatch(text):
        raise QuantityError(
            f"{_shown(value)} is not a Kubernetes quantity (a number and a suffix "
            "such as 500m, 8, 4Gi, 1e3)"
        )
    try:
        amount: Decimal = _official().parse_quantity(text)
    except (ValueError, ArithmeticError) as error:
        raise QuantityError(f"{_shown(value)} is not a Kubernetes quantity ({error})") from None
    return amount


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@cache
def _official() -> ModuleType:
    spec = importlib.util.find_spec("kubernetes")  # finds the package, runs none of it
    if spec is None or not spec.submodule_search_locations:
        raise QuantityError("the Kubernetes client is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "quantity.py"
    loaded = importlib.util.spec_from_file_location("mxgitops._kubernetes_quantity", path)
    if loaded is None or loaded.loader is None:
        raise QuantityError(f"cannot load the Kubernetes client's {path}")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module

"""kafkatx: Kafka transaction operator toolkit.

Decode a broker's on-disk transaction state, replay the transaction coordinator
offline to find hanging transactions, repair them, and ask the same questions of
a live cluster. The library lives in ``format``/``log``/``txn``/``repair``/``cluster``;
``cli`` is a thin Typer front over it.
"""

__version__ = "0.2.0"

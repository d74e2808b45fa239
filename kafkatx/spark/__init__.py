"""``kafkatx scan``: the offline analysis as a PySpark job (job.py), its executor code (rows.py)
and its Parquet schemas (schema.py). pyspark is imported lazily inside functions only."""

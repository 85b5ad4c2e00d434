"""A streaming copy ``in`` -> upper(value) -> ``out`` in a process of its own (its own
SparkSession, local[2]), for the kill -9 test (tests/spark/test_spark_stream_crash.py):
``python stream_driver.py DATA_DIR CHECKPOINT run|drain``. ``run`` prints STARTED once the
query runs, then runs until killed; ``drain`` runs until caught up (Trigger.AvailableNow)."""

import os
import sys


def main(data_dir: str, ckpt: str, mode: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from engine.spark.source import RivvenDataSource

    spark = (SparkSession.builder.master("local[2]").appName("rivven-stream-crash")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RivvenDataSource)
    df = (spark.readStream.format("rivven").option("path", data_dir).option("topic", "in")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "3000").load())
    w = (df.selectExpr("key", "upper(cast(value as string)) as value").writeStream
         .format("rivven").option("path", data_dir).option("topic", "out")
         .option("checkpointLocation", ckpt))
    if mode == "drain":
        q = w.trigger(availableNow=True).start()
        q.awaitTermination()
        print("DONE" if q.exception() is None else f"FAILED {q.exception()}", flush=True)
    else:
        q = w.trigger(processingTime="200 milliseconds").start()
        print("STARTED", flush=True)
        q.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:4])

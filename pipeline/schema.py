"""The source's schema (Spark's Kafka connector's) and the sink's input columns."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipeline.options import OptionError

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

# Spark's Kafka source schema: timestampType is Kafka's id (0 CreateTime,
# 1 LogAppendTime, -1 none).
_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def source_schema(include_headers: bool) -> StructType:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType):
    """The Arrow schema Spark expects record batches in (UTC timestamps)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


# The sink's columns: name -> (allowed types, what they mean). Others are ignored, as in
# Spark's Kafka sink.
_BYTES = (BinaryType, StringType)
SINK_COLUMNS: dict[str, tuple[tuple[type[DataType], ...], str]] = {
    "value": (_BYTES, "binary or string"),
    "key": (_BYTES, "binary or string"),
    "topic": ((StringType,), "string"),
    "partition": ((IntegerType,), "int"),
}


def check_sink_schema(schema: StructType, topic_option: str | None) -> list[str]:
    """The sink columns present, in SINK_COLUMNS order (+ headers); bad ones raise."""
    fields = {f.name.lower(): f for f in schema.fields}
    if "value" not in fields:
        raise OptionError(
            "The quill sink needs a 'value' column (binary or string); the DataFrame has "
            f"columns {', '.join(schema.fieldNames()) or 'none'}. Select or alias one as value."
        )
    for name, (types, described) in SINK_COLUMNS.items():
        f = fields.get(name)
        if f is not None and not isinstance(f.dataType, types):
            raise OptionError(
                f"The sink's '{name}' column must be {described}, but it is "
                f"{f.dataType.simpleString()}; cast it, e.g. col('{name}').cast('{described.split()[0]}')."
            )
    if "headers" in fields and fields["headers"].dataType != HEADERS_TYPE:
        raise OptionError(
            "The sink's 'headers' column must be array<struct<key:string,value:binary>>, but it "
            f"is {fields['headers'].dataType.simpleString()}."
        )
    if topic_option is None and "topic" not in fields:
        raise OptionError(
            "The quill sink needs a topic: set .option('topic', ...) or give the DataFrame a "
            "string 'topic' column."
        )
    return [n for n in (*SINK_COLUMNS, "headers") if n in fields]

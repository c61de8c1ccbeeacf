"""Avro and Protobuf display of record keys and values (issue 29): Confluent's wire
format with a schema registry (console.schemas.registry), or a schema uploaded to the
console per topic (console.models.TopicSchema); compiled and decoded by
console.schemas.codec, per page by console.schemas.decoder."""

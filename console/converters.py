"""URL path converters for names Kafka lets clients choose: a consumer group id may hold
any character ('/', '?', '#', '%', spaces, any script), so its part of the path is
everything up to the route's fixed tail. `{% url %}` and `reverse` percent-encode what
must be ('?' '#' '%' space and non-ASCII); '/' stays as is and is matched here."""

from __future__ import annotations

from django.urls import register_converter


class KafkaNameConverter:
    regex = r"[\s\S]+"  # any character, newlines too, at least one

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(KafkaNameConverter, "kname")

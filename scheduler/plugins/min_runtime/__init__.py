"""Min-runtime protection: the victim filter and the start it counts from, the queue walk, the elastic validator."""

from scheduler.plugins.min_runtime.elastic import ElasticMinRuntime
from scheduler.plugins.min_runtime.plugin import MinRuntime

__all__ = ["ElasticMinRuntime", "MinRuntime"]

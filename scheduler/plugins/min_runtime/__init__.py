"""Min-runtime protection: the victim filter, the queue-tree resolver and the elastic-group validator."""

from scheduler.plugins.min_runtime.elastic import ElasticMinRuntime
from scheduler.plugins.min_runtime.plugin import MinRuntime

__all__ = ["ElasticMinRuntime", "MinRuntime"]

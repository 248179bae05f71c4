"""DynamicResources (DRA, structured parameters): the plugin, its allocator, the device inventory and CEL selectors."""

from scheduler.plugins.dynamic_resources.plugin import DynamicResources

__all__ = ["DynamicResources"]

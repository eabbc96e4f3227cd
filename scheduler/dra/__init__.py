"""Dynamic Resource Allocation: the device allocator (structured parameters) and the CEL environment."""

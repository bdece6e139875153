"""The reference's node-local readiness gate (bindingModel node-local): a per-node daemon that publishes its node's
devices with binding conditions, readies the allocated ones and then reports them ready (or failed)."""

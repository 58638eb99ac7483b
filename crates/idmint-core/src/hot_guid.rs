//! HotGuid (placeholder, being written).

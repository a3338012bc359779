"""Example adapters and actors shipped with phloem (registered in conf/phloem.toml)."""

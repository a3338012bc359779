"""The phloem daemon: `server` (config → tree → socket → clean stop), `connection` (one
client connection), `socketfile` (where the socket lives and who may connect)."""

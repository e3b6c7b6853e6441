"""Reports published into documentation: the static site and the MkDocs plugin."""

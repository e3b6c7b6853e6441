"""Stage 6, render: report models → text. One small module per format; they format,
they never compute."""

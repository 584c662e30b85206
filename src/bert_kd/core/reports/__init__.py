"""Results as people read them: Markdown tables, figures, and whether a comparison has a best student."""

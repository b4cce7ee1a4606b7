"""The test suite (a package, so that a site-packages ``tests`` — small-text ships one — never
shadows it)."""

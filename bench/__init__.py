"""Scripts that measure the project and print figures (bench/README.md); not part of the product."""

"""Implementation families of gemmbench. Each family is a subpackage; `registry` is the one seam."""

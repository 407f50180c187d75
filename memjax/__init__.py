"""memjax."""

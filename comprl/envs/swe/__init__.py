"""SWE-lite: bug fixing in small Python repositories under a sandbox, graded by hidden tests in a trusted process;
and the adapter to the real SWE-bench in Docker."""

"""The embedded model (llama.cpp through xllamacpp): speed, memory, threads, replicas, prompt cache and reuse."""

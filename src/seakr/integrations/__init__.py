"""Doors from the frameworks RAG pipelines are built with: :mod:`.haystack` (``seakr[haystack]``) and :mod:`.langchain`
(``seakr[langchain]``). Each imports its framework only when it is imported itself."""

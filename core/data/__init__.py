"""Data files shipped with bridge-rag (the offline demo corpus and its questions)."""

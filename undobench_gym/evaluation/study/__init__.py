"""The study (docs/study.md): the paper's design re-run on real services, rendered from the
runs by code so that the document stays true, beside the paper's published figures."""
